"""Blackout windows: adding, changing, lifting and listing the windows during which
slots are skipped or deferred (``windows.py``; the rule is ``core/blackouts.py``, applied
where the claim path plans a slot)."""
