"""`terravixens spec serve`: nodes pull their resolved spec over HTTP(S) (ADR 0019).

    auth.py       who a request's bearer token names, and what that principal may read (the 400/401/403/404 table)
    specset.py    one immutable snapshot of the served specs and tokens; rebuilt on reload, swapped whole
    app.py        the Starlette application: /spec/{identity}, /healthz, request limits, access log
    protocol.py   uvicorn's httptools protocol with a deadline and a size cap for request headers
    logs.py       JSON-lines logs that never hold a token or a raw request path
    server.py     the process: bind, TLS, SIGHUP and file-change reload, uvicorn

Imported only by the `spec serve` command: synth never pays for Starlette or uvicorn.
"""
