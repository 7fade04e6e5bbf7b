"""Server-rendered pages (Jinja2). Core forms work without JavaScript."""
