"""`l2`: the site's LoadBalancer IP pools exist in Cilium, enabled, without a conflict and with addresses left
(operator conditions `cilium.io/PoolConflict`, `cilium.io/IPsAvailable`), and the L2 announcement policy
terravixens renders (`terravixens-l2`) has no error condition (`io.cilium/bad-*` True). Checked only when the site
has pools (no pool: no policy either)."""

from __future__ import annotations

from terravixens.operations.acceptance.base import CheckProblem, CheckResult, Context, Status, plural, verdict
from terravixens.operations.observe import Absent, JsonObject, Observed, Unread

NAME = "l2"
POLICY = "terravixens-l2"


def _conditions(item: JsonObject) -> dict[str, JsonObject]:
    return {str(c.get("type")): c for c in (item.get("status") or {}).get("conditions") or [] if isinstance(c, dict)}


def check(context: Context, observed: Observed) -> CheckResult:
    wanted = sorted(context.cluster.cilium.pools)
    if not wanted:
        return CheckResult(NAME, Status.OK, "the site has no LoadBalancer pools: nothing to announce")
    redeploy = f"terravixens deploy {context.gitops}"
    problems: list[CheckProblem] = []
    unread: list[str] = []
    available: list[str] = []
    pools = observed.pools
    if isinstance(pools, Unread):
        unread.append(str(pools))
    elif isinstance(pools, Absent):
        problems.append(CheckProblem(f"Cilium's LoadBalancer IP pools are not served ({pools.what})", redeploy))
    else:
        by_name = {str((p.get("metadata") or {}).get("name")): p for p in pools}
        for name in wanted:
            pool = by_name.get(name)
            if pool is None:
                problems.append(CheckProblem(f"no CiliumLoadBalancerIPPool {name}", redeploy))
                continue
            if (pool.get("spec") or {}).get("disabled"):
                problems.append(CheckProblem(f"pool {name} is disabled", f"{redeploy} (the site's pools are enabled)"))
            conditions = _conditions(pool)
            conflict = conditions.get("cilium.io/PoolConflict")
            if conflict and conflict.get("status") == "True":
                problems.append(
                    CheckProblem(
                        f"pool {name}: {conflict.get('message') or conflict.get('reason')}",
                        f"give clusters.{context.cluster_name}.cilium.pools.{name} ranges no other pool has, then "
                        f"{redeploy}",
                    )
                )
            left = str((conditions.get("cilium.io/IPsAvailable") or {}).get("message", ""))
            total = str((conditions.get("cilium.io/IPsTotal") or {}).get("message", "?"))
            if left.isdigit() and int(left) == 0:
                problems.append(
                    CheckProblem(
                        f"pool {name} has no address left ({total} in all)",
                        f"add a range to clusters.{context.cluster_name}.cilium.pools.{name}, then {redeploy}",
                    )
                )
            elif left.isdigit():
                available.append(f"{name} ({left} of {total} addresses free)")
            else:
                available.append(f"{name} (addresses not counted yet)")
    policies = observed.l2_policies
    if isinstance(policies, Unread):
        unread.append(str(policies))
    elif isinstance(policies, Absent):
        problems.append(CheckProblem(f"Cilium's L2 announcement policies are not served ({policies.what})", redeploy))
    else:
        by_name = {str((p.get("metadata") or {}).get("name")): p for p in policies}
        if POLICY not in by_name:
            problems.append(CheckProblem(f"no CiliumL2AnnouncementPolicy {POLICY}", redeploy))
        for name, policy in sorted(by_name.items()):
            for kind, condition in sorted(_conditions(policy).items()):
                if condition.get("status") == "True":
                    problems.append(
                        CheckProblem(
                            f"L2 policy {name}: {kind}: {condition.get('message') or condition.get('reason')}",
                            f"fix clusters.{context.cluster_name}.cilium.l2_interfaces in the site, then {redeploy}"
                            if name == POLICY
                            else f"`kubectl describe ciliuml2announcementpolicy {name}`",
                        )
                    )
    return verdict(
        NAME,
        problems,
        f"{plural(len(wanted), 'pool')}: {', '.join(available)}; L2 policy {POLICY} without error conditions",
        unread,
    )
