"""How ``ai-memory serve`` serves: gunicorn's gevent worker, the waits it parks, and the
caps on them (docs/serving.md).

Nothing outside this package and the launcher imports it: the apps see only the small
waiting interface of ``aimemory_site.lib.wakeups``, which this package fills in for the
process it serves in (``gunicorn_config``).
"""
