#!/usr/bin/env python3
"""Provider toolchain: bindings for synth, and the offline provider mirror when asked. Idempotent; stdlib only.

    python3 scripts/providers.py bindings   # what synth needs (make setup): typed bindings in terravixens/_bindings/
    python3 scripts/providers.py mirror     # what offline Terraform needs (make mirror; tests,
                                            # TERRAVIXENS_PROVIDERS=mirror)
    python3 scripts/providers.py env [MODE] # shell exports of a provider installation mode (make -s provider-env)
    python3 scripts/providers.py tofu       # OpenTofu (pinned, >= 1.11) into the cache's bin/ (make setup-test)
    python3 scripts/providers.py            # mirror, then bindings (make providers)

`bindings` regenerates the typed Python bindings in terravixens/_bindings/ (cdktf.json's codeMakerOutput: inside our
package, so a user's own `imports` package cannot hide them and the wheel has no top-level `imports`) with
`cdktf get`, fed from the committed schemas
(terravixens/schemas/) through the provider schema cache: no registry, no provider binary, no Terraform CLI; only
when the schemas, cdktf.json or the cdktf version changed (a stamp).

`mirror` 1. finds a Terraform CLI (`terraform` >= 1.5 on PATH, or `$TERRAFORM_BINARY_NAME`), otherwise builds OpenTofu
from the Go module proxy into the cache; 2. builds every provider that the Go module proxy serves (providers.json)
into a Terraform filesystem mirror in the cache (outside the repository) and writes a CLI config that installs from
that mirror only (used only in the mirror mode: terravixens/provider_install.py); 3. dumps `providers schema -json`
of each built provider into terravixens/schemas/<name>.json (committed), rewriting only on a real change.

Prints one line per step with its wall time, so cold and warm runs can be compared.
See docs/adr/0003-offline-provider-toolchain.md, 0012-bindings-from-schemas.md and 0013-provider-installation-modes.md.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from terravixens import provider_install  # noqa: E402  (standard library only)

PINS = json.loads((ROOT / "providers.json").read_text())
CACHE = provider_install.cache_dir()
MIRROR = provider_install.mirror_dir()
CLI_CONFIG = provider_install.mirror_cli_config()
SCHEMAS = ROOT / "terravixens" / "schemas"
# Where the bindings go: cdktf.json's codeMakerOutput (terravixens/_bindings, the package terravixens._bindings).
IMPORTS = ROOT / json.loads((ROOT / "cdktf.json").read_text())["codeMakerOutput"]
STAMP = IMPORTS / ".schema-stamp"
STAGING = ROOT / ".gen" / "bindings"
PLATFORM = "linux_amd64"


def log(step: str, started: float) -> None:
    print(f"[providers] {step} ({time.monotonic() - started:.1f}s)", flush=True)


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, capture: bool = False) -> str:
    result = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=capture)
    if result.returncode != 0:
        if capture:
            sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"[providers] command failed ({result.returncode}): {' '.join(cmd)}")
    return result.stdout if capture else ""


def go_env() -> dict:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    env["CGO_ENABLED"] = "0"
    return env


def go_build_module(module: str, version: str, out: Path, ldflags: str = "-s -w", package: str = ".") -> None:
    """Builds `module@version` by downloading it and building inside a writable copy.

    `go install module@version` is not used: it refuses modules with `replace` directives and it asks the proxy for
    the module's version list (refused here for some providers) to check deprecation.
    """
    info = json.loads(run(["go", "mod", "download", "-json", f"{module}@{version}"], env=go_env(), capture=True))
    src = CACHE / "src" / f"{module.replace('/', '_')}@{version}"
    if not src.exists():
        shutil.copytree(info["Dir"], src)
        for path in src.rglob("*"):
            path.chmod(path.stat().st_mode | 0o200)
        src.chmod(src.stat().st_mode | 0o200)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial")
    run(["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), package], cwd=src, env=go_env())
    tmp.rename(out)


def terraform_binary() -> str:
    """The CLI to use: $TERRAFORM_BINARY_NAME, else terraform >= 1.5 on PATH, else OpenTofu built into the cache."""
    wanted = os.environ.get("TERRAFORM_BINARY_NAME")
    if wanted:
        found = shutil.which(wanted) or (str(CACHE / "bin" / wanted) if (CACHE / "bin" / wanted).exists() else None)
        if found:
            return found
        if wanted != "tofu":
            raise SystemExit(f"[providers] TERRAFORM_BINARY_NAME={wanted} is not on PATH")
    else:
        found = shutil.which("terraform")
        if found and terraform_version_ok(found):
            return found
    print("[providers] no terraform >= 1.5 on PATH: OpenTofu from the Go module proxy")
    return build_tofu(time.monotonic())


def build_tofu(started: float) -> str:
    """OpenTofu at the pinned version in the cache's bin/ (make setup-test; the mirror's fallback CLI), built from the
    Go module proxy unless the binary there already reports that version. Its `version` package marks every build
    `-dev` unless told otherwise: this one is the release, so it says so."""
    pin = PINS["opentofu_fallback"]
    tofu = CACHE / "bin" / "tofu"
    wanted = pin["version"].removeprefix("v")
    tofu.parent.mkdir(parents=True, exist_ok=True)
    # One build at a time: `make setup-test` may ask for it twice at once (the mirror's fallback CLI and the test
    # CLI), and every checkout on the machine shares the cache.
    with (tofu.parent / ".tofu.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cli_version(str(tofu)) if tofu.exists() else None
        if found == wanted:
            log(f"OpenTofu {wanted} in {tofu}", started)
            return str(tofu)
        print(f"[providers] building OpenTofu {wanted} with Go (found: {found or 'none'})", flush=True)
        ldflags = "-s -w -X github.com/opentofu/opentofu/version.dev=no"
        go_build_module(pin["go_module"], pin["version"], tofu, ldflags=ldflags, package="./cmd/tofu")
    built = cli_version(str(tofu))
    if built != wanted:
        raise SystemExit(f"[providers] {tofu} reports version {built}, not {wanted}")
    log(f"OpenTofu {wanted} built into {tofu}", started)
    return str(tofu)


def cli_version(binary: str) -> str | None:
    """`terraform_version` of `version -json` (Terraform and OpenTofu print the same field); None if it cannot tell."""
    try:
        out = subprocess.run([binary, "version", "-json"], text=True, capture_output=True, timeout=60).stdout
        return str(json.loads(out)["terraform_version"])
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


def terraform_version_ok(binary: str) -> bool:
    version = cli_version(binary)
    try:
        major, minor = (int(x) for x in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (1, 5)


def mirror_path(source: str, version: str) -> Path:
    namespace, name = source.split("/")
    binary = f"terraform-provider-{name}_v{version}"
    return MIRROR / "registry.terraform.io" / namespace / name / version / PLATFORM / binary


def buildable() -> dict[str, dict]:
    return {name: pin for name, pin in PINS["providers"].items() if pin["binary"].startswith("built")}


def build_providers() -> None:
    for pin in buildable().values():
        target = mirror_path(pin["source"], pin["version"])
        if not target.exists():
            print(f"[providers] building {pin['source']} {pin['version']} with Go")
            go_build_module(
                pin["go_module"], f"v{pin['version']}", target, ldflags=f"-s -w -X main.version={pin['version']}"
            )
        # OpenTofu resolves "bpg/proxmox" to registry.opentofu.org; its mirror scan does not follow symlinks,
        # so the same binary is hard-linked under that hostname too.
        alias = MIRROR / "registry.opentofu.org" / target.relative_to(MIRROR / "registry.terraform.io")
        if not alias.exists():
            alias.parent.mkdir(parents=True, exist_ok=True)
            os.link(target, alias)


def write_cli_config() -> None:
    """The mirror mode's CLI config, in the cache. Nothing points Terraform at it unless the mirror mode is asked
    for."""
    CLI_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    text = provider_install.mirror_cli_config_text(MIRROR)
    if not CLI_CONFIG.exists() or CLI_CONFIG.read_text() != text:
        CLI_CONFIG.write_text(text)


def tf_env() -> dict:
    env = provider_install.terraform_env("mirror")
    env["TF_IN_AUTOMATION"] = "1"
    return env


def dump_schemas(terraform: str) -> None:
    for name, pin in buildable().items():
        with tempfile.TemporaryDirectory(prefix="tv-schema-") as work:
            Path(work, "main.tf.json").write_text(
                json.dumps(
                    {"terraform": {"required_providers": {name: {"source": pin["source"], "version": pin["version"]}}}}
                )
            )
            run([terraform, "init", "-input=false", "-backend=false"], cwd=Path(work), env=tf_env(), capture=True)
            schema = json.loads(
                run([terraform, "providers", "schema", "-json"], cwd=Path(work), env=tf_env(), capture=True)
            )
        # The same schema whichever CLI dumped it: OpenTofu names the provider after its own registry.
        schema["provider_schemas"] = {
            key.replace("registry.opentofu.org/", "registry.terraform.io/"): value
            for key, value in schema["provider_schemas"].items()
        }
        target = SCHEMAS / f"{name}.json"
        if target.exists() and comparable(json.loads(target.read_text())) == comparable(schema):
            continue
        target.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        print(f"[providers] wrote {target.relative_to(ROOT)}")


def comparable(value):
    """A schema without the `write_only` flags that OpenTofu 1.10 does not print: same provider, same schema."""
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items() if key != "write_only"}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


def generated_providers() -> dict[str, dict]:
    """Providers whose bindings cdktf generates (those named in cdktf.json), each with its committed schema."""
    constraints = json.loads((ROOT / "cdktf.json").read_text())["terraformProviders"]
    out = {}
    for constraint in constraints:
        source, _, version_constraint = constraint.partition("@")
        name = source.split("/")[1]
        out[name] = {"source": source, "constraint": version_constraint, "schema": SCHEMAS / f"{name}.json"}
    return out


def check_pins() -> None:
    """providers.json is the one place versions are pinned; cdktf.json must say the same exact versions."""
    for name, item in generated_providers().items():
        pin = PINS["providers"].get(name)
        if pin is None or item["source"] != pin["source"] or item["constraint"] != f"={pin['version']}":
            expected = f"{pin['source']}@={pin['version']}" if pin else f"an entry for {name!r} in providers.json"
            raise SystemExit(
                f"[providers] cdktf.json pins {item['source']}@{item['constraint']}, providers.json "
                f"says {expected}: make them agree"
            )


def cache_file_name(name: str, constraint: str) -> str:
    """What `cdktf get --experimental-provider-schema-cache-path` looks for: <name>@<url-encoded constraint>.json."""
    return f"{name}@{urllib.parse.quote(constraint, safe='')}.json"


# The generated code does not depend on codeMakerOutput (each `cdktf get` writes into its own staging project, and
# jsii's modules import each other relatively): a new output folder has no stamp of its own and is generated anew.
BINDING_SETTINGS = ("language", "terraformProviders", "terraformModules")
BINDINGS_DOC = '''"""Typed provider bindings generated by `cdktf get` (scripts/providers.py bindings) from the schemas.

Generated, not committed: `make setup` writes them. They live inside the terravixens package (ADR 0041) so that the
wheel has no top-level `imports` package and a project's own `imports/` (every cdktf project has one) cannot hide them.
"""
'''


def schema_stamp() -> str:
    digest = hashlib.sha256()
    # What shapes the generated code; the app command ("app") and the context do not.
    project = json.loads((ROOT / "cdktf.json").read_text())
    digest.update(json.dumps({key: project.get(key) for key in BINDING_SETTINGS}, sort_keys=True).encode())
    digest.update((ROOT / "package-lock.json").read_bytes())
    for name, item in sorted(generated_providers().items()):
        digest.update(name.encode())
        digest.update(item["schema"].read_bytes())
    return digest.hexdigest()


# A schema this large (proxmox: 644 KB) gets a `cdktf get` of its own; the small ones share one (see below).
LARGE_SCHEMA_BYTES = 100_000


def binding_groups(providers: dict[str, dict]) -> list[list[str]]:
    """Providers grouped for `cdktf get`, largest group first.

    One `cdktf get` compiles the generated TypeScript of all its providers once per provider (each binding's jsii
    assembly holds the code of all of them): with proxmox among four providers that is four compiles of proxmox.
    Each large schema alone, the small ones together: each large one compiled once, and two runs share the cores.
    """
    large = [[name] for name in providers if providers[name]["schema"].stat().st_size >= LARGE_SCHEMA_BYTES]
    small = [name for name in providers if providers[name]["schema"].stat().st_size < LARGE_SCHEMA_BYTES]
    return large + ([small] if small else [])


def generate_bindings(started: float) -> None:
    stamp = schema_stamp()
    if STAMP.exists() and STAMP.read_text().strip() == stamp:
        STAMP.touch()  # newer than terravixens/schemas/ again, so make stops asking
        print(f"[providers] bindings in {IMPORTS.relative_to(ROOT)}/ are up to date with terravixens/schemas/")
        return
    providers = generated_providers()
    groups = binding_groups(providers)
    shutil.rmtree(STAGING, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="tv-schema-cache-") as cache:
        for name, item in providers.items():
            schema = json.loads(item["schema"].read_text())
            version = PINS["providers"][name]["version"]
            schema["provider_versions"] = {f"registry.terraform.io/{item['source']}": version}
            Path(cache, cache_file_name(name, item["constraint"])).write_text(json.dumps(schema))
        workers = max(1, min(len(groups), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda group: cdktf_get(group, providers, Path(cache), started), groups))
    IMPORTS.mkdir(exist_ok=True)
    (IMPORTS / "__init__.py").write_text(BINDINGS_DOC)
    for stale in IMPORTS.iterdir():
        if stale.is_dir() and stale.name not in providers:
            shutil.rmtree(stale)
    for group in groups:
        for name in group:
            shutil.rmtree(IMPORTS / name, ignore_errors=True)
            (STAGING / group[0] / "imports" / name).rename(IMPORTS / name)
    # What one `cdktf get` of all providers writes beside them (it reads constraints.json to skip unchanged ones).
    cdktf_version = json.loads((STAGING / groups[0][0] / "imports" / "constraints.json").read_text())["cdktf"]
    (IMPORTS / "constraints.json").write_text(
        json.dumps(
            {
                "cdktf": cdktf_version,
                "providers": {name: providers[name]["constraint"] for name in sorted(providers)},
            },
            indent=2,
        )
        + "\n"
    )
    (IMPORTS / "versions.json").write_text(
        json.dumps(
            {
                f"registry.terraform.io/{item['source']}": PINS["providers"][name]["version"]
                for name, item in providers.items()
            },
            indent=2,
        )
        + "\n"
    )
    shutil.rmtree(STAGING, ignore_errors=True)
    STAMP.write_text(stamp + "\n")


def cdktf_get(group: list[str], providers: dict[str, dict], cache: Path, started: float) -> None:
    """`cdktf get` of `group` in its own project under .gen/ (inside the repository, so that cdktf's
    `pipenv run pip show cdktf` finds this project's environment)."""
    project = STAGING / group[0]
    project.mkdir(parents=True)
    (project / "cdktf.json").write_text(
        json.dumps(
            {
                "language": "python",
                "app": "true",
                "sendCrashReports": "false",
                "codeMakerOutput": "imports",
                "terraformProviders": [f"{providers[n]['source']}@{providers[n]['constraint']}" for n in group],
                "terraformModules": [],
                "context": {},
            }
        )
    )
    # No Terraform CLI is involved: every schema comes from the cache folder, never from `terraform init`.
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{env['PATH']}"
    env["PIPENV_PIPFILE"] = str(ROOT / "Pipfile")
    env["CDKTF_DISABLE_PLUGIN_CACHE_ENV"] = "1"
    env["CHECKPOINT_DISABLE"] = "1"
    run(
        ["cdktf", "get", "--force", f"--experimental-provider-schema-cache-path={cache}"],
        cwd=project,
        env=env,
        capture=True,
    )
    log(f"bindings of {', '.join(providers[n]['source'] for n in group)} generated", started)


def mirror(started: float) -> None:
    terraform = terraform_binary()
    log(f"terraform CLI: {terraform}", started)
    build_providers()
    log(f"providers in mirror {MIRROR}", started)
    write_cli_config()
    dump_schemas(terraform)
    log("schemas dumped to terravixens/schemas/", started)


def bindings(started: float) -> None:
    generate_bindings(started)
    log(f"bindings in {IMPORTS.relative_to(ROOT)}/", started)


def main(argv: list[str]) -> None:
    started = time.monotonic()
    command = argv[0] if argv else "all"
    if command == "env":
        try:
            selected = argv[1] if len(argv) > 1 else provider_install.mode()
            sys.stdout.write(provider_install.shell_exports(selected))
        except provider_install.ProviderModeError as error:
            raise SystemExit(f"[providers] {error}") from None
        return
    if command == "tofu":
        build_tofu(started)
        return
    if command not in ("all", "mirror", "bindings"):
        raise SystemExit(f"[providers] unknown command {command!r}: use bindings, mirror, tofu, env or nothing (both)")
    check_pins()
    if command in ("all", "mirror"):
        mirror(started)
    if command in ("all", "bindings"):
        bindings(started)


if __name__ == "__main__":
    main(sys.argv[1:])
