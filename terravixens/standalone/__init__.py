"""Layer 2 beyond the site file: specs (what a standalone node converges to), postures (how it is trusted), the
secrets file (ssh public keys and tokens, read at serve/apply time) and the resolution of a site's standalone nodes
against them.

    spec.py       the Spec model (schema_version 1): identity, network, access, platform, type config, run
    posture.py    the Posture model and the shipped postures dev, stage, prod, local
    secrets.py    the secrets file: strict read, 0600 required, never echoed
    files.py      one YAML file -> one model, with located problems (strict bounded reader)
    catalog.py    a specs folder: <name>.yaml specs and postures/<name>.yaml postures
    topology.py   each standalone node placed: parent chain, tier, preset resolved, NICs (what the L2 stack builds)
    references.py the rules across files: site -> specs, everything -> secrets
    resolve.py    load all of it, check every rule, and resolve each node's spec (references expanded)
    validate.py   `spec validate`
    schemas.py    JSON Schemas of the site, spec and posture files
"""
