"""Blackout windows.

Owns the windows during which slots are skipped or deferred: adding, changing, lifting,
listing and showing them (``windows.py``). The rule is ``core/blackouts.py``, applied where
the claim path plans a slot (``store/runs.py``).
"""
