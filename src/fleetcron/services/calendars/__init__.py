"""Calendars.

Owns the named sets of dates jobs name in ``run_only_on`` and ``never_on``: adding one by
hand, importing one from an iCalendar file, listing, showing and removing them
(``sets.py``). The filter itself is ``core/calendars.py``; the claim path applies it.
"""
