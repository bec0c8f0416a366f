"""The console's routes, one module per job; :func:`controller.floor.web.build_app` joins them.

``pages``: the floor map, the alert queue and a table's page; ``api``: the JSON
answers, ``/healthz`` and the icon; ``stream``: the live event streams; ``login``:
surveillance's login and logout; ``actions``: confirming and clearing an alert;
``figures``: the shift figures and their CSV. ``common`` holds what several share
(the session cookie, the same-origin check, an alert id in a URL, a form's fields).
Each module's ``routes(...)`` gives its :class:`starlette.routing.Route` list.
"""
