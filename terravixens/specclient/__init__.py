"""`terravixens spec get`: a node fetches its resolved spec from the spec server (ADR 0019).

    envfile.py   the environment file cloud-init writes (server URL, identity, token, CA file)
    fetch.py     one HTTP(S) request, bounded; retries with exponential backoff and full jitter in a time budget
    get.py       the command: read, fetch, verify, write atomically (0600); exit codes

Standard library only (plus terravixens' strict readers of JSON and text, and the node.env format): a node needs
neither pydantic nor PyYAML, Starlette, uvicorn or cdktf (tests/test_spec_client.py imports `get` in a fresh
interpreter and fails on any other module).
"""
