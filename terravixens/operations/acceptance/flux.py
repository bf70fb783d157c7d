"""`flux`: Flux's sources (GitRepository) and Kustomizations are Ready for their current spec — the `Ready`
condition True and observed at the object's generation (a stale Ready after a change does not count), none
suspended — the site's own pair (flux-system/flux-system) among them. Checked only when the site has Flux."""

from __future__ import annotations

import re

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, Status, plural, verdict
from terravixens.operations.observe import Absent, JsonObject, Observed, Unread

NAME = "flux"
SITE_OBJECT = ("flux-system", "flux-system")
KINDS = (
    ("GitRepository", "gitrepository", "source git"),
    ("Kustomization", "kustomization", "kustomization"),
)


def _one(kind: str, resource: str, flux: str, item: JsonObject, context: Context) -> tuple[CheckProblem | None, str]:
    metadata = item.get("metadata") or {}
    name, namespace = str(metadata.get("name")), str(metadata.get("namespace"))
    label = f"{kind} {namespace}/{name}"
    describe = f"`kubectl -n {namespace} describe {resource} {name}`"
    if (item.get("spec") or {}).get("suspend"):
        return CheckProblem(f"{label} is suspended", f"`flux resume {flux} {name} -n {namespace}`"), ""
    status = item.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready is None:
        return CheckProblem(f"{label} has no Ready condition yet (never reconciled)", describe), ""
    said = f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ")
    if ready.get("status") != "True":
        fix = describe
        if ready.get("reason") == "AuthenticationFailed":
            fix = (
                f"the git credentials: flux.{context.cluster_name} in the secrets file, then bump "
                f"git_credentials_revision and terravixens deploy {context.gitops}"
            )
        return CheckProblem(f"{label} is not Ready ({ready.get('status')}, {said})", fix), ""
    generation = metadata.get("generation")
    seen = ready.get("observedGeneration", status.get("observedGeneration"))
    if generation is not None and seen != generation:
        return (
            CheckProblem(
                f"{label} is Ready for generation {seen}, the object is at generation {generation}",
                f"`flux reconcile {flux} {name} -n {namespace}` (or wait for its interval)",
            ),
            "",
        )
    revision = str((status.get("artifact") or {}).get("revision") or status.get("lastAppliedRevision") or "")
    short = re.sub(r"(:[0-9a-f]{8})[0-9a-f]+$", r"\1", revision)  # main@sha1:132f4e71
    return None, f"{label}" + (f" ({short})" if short else "")


def check(context: Context, observed: Observed) -> CheckResult:
    if context.cluster.flux is None:
        return CheckResult(NAME, Status.OK, "the site has no Flux: nothing to check")
    problems: list[CheckProblem] = []
    unread: list[str] = []
    ready: list[str] = []
    for (kind, resource, flux), found in zip(KINDS, (observed.git_repositories, observed.kustomizations), strict=True):
        if isinstance(found, Unread):
            unread.append(str(found))
            continue
        if isinstance(found, Absent):
            problems.append(
                CheckProblem(
                    f"Flux is not installed ({found.what})",
                    f"Flux is the gitops layer's: terravixens deploy {context.gitops}",
                )
            )
            continue
        names = {
            (str((i.get("metadata") or {}).get("namespace")), str((i.get("metadata") or {}).get("name"))) for i in found
        }
        if SITE_OBJECT not in names:
            problems.append(CheckProblem(f"no {kind} flux-system/flux-system", f"terravixens deploy {context.gitops}"))
        for item in sorted(
            found,
            key=lambda i: (str((i.get("metadata") or {}).get("namespace")), str((i.get("metadata") or {}).get("name"))),
        ):
            problem, seen = _one(kind, resource, flux, item, context)
            if problem is not None:
                problems.append(problem)
            else:
                ready.append(seen)
    return verdict(NAME, problems, f"{plural(len(ready), 'object')} Ready: {', '.join(ready)}", unread)
