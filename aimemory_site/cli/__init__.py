"""The ``ai-memory`` command. Client commands import no Django code: hooks run them often."""
