"""What a session learns when it starts: the on-start block of the lifecycle hooks
(``POST /api/v1/sessions``, ``GET /handoff``) and the briefing (``GET /api/v1/briefing``,
the ``memory_briefing`` tool).

It reads both apps (a project's handoff and brief from ``projects``, its pending mail from
``messaging``), so it sits a layer above them; neither app imports it.
"""
