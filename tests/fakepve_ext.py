"""A fake Proxmox VE for the integration tests: fakepve 0.5.0 plus the state terravixens' stacks need.

fakepve (AGPL-3.0, test-only dependency) answers every PVE 9 endpoint, but outside its hand-written areas "a write
succeeds and changes nothing" and reads are made up from the API schema. bpg/proxmox then fails on our
hypervisors stack ("Linux Bridge interface not found after creation") or drifts for ever (role privileges, user
groups, token comment), and fakepve 0.5.0 stores PUT/POST /qemu/{vmid}/config values as raw strings, so any VM
update breaks the next read ("cannot unmarshal string into Go struct field Alias.cores of type int64").
`TvFakePve` adds minimal state for network interfaces, roles, users, ACLs and tokens through fakepve's extension
point (every `_routes_<area>` method is registered before the catch-all, after the schema's checks), and stores
typed VM config values. `FakePveServer` runs it on a loopback address in a thread, with helpers to inject faults.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import threading
import uuid
from pathlib import Path

from fakepve import FakePve
from fakepve.certs import make_cert
from fakepve.routing import die, split_list

USER_FIELDS = ("comment", "email", "enable", "expire", "firstname", "lastname", "keys", "groups")
NET_SKIP = ("node", "iface", "delete")


class TvFakePve(FakePve):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.tv_roles = {}  # roleid -> set(privs)
        self.tv_users = {"root@pam": {"enable": 1, "expire": 0, "comment": "root"}}
        self.tv_acl = []  # dicts: path, type, ugid, roleid, propagate
        self.tv_tokens = {}  # (userid, tokenid) -> {comment, expire, privsep}
        self.tv_net = {}  # node -> iface -> config

    def add_node(self, name, online=True):
        super().add_node(name, online)
        # What a fresh PVE node has: the NIC and the default bridge.
        self.tv_net.setdefault(
            name,
            {
                "enp2s0": {"type": "eth", "method": "manual", "autostart": 0},
                "vmbr0": {
                    "type": "bridge",
                    "method": "static",
                    "autostart": 1,
                    "bridge_ports": "enp1s0",
                    "cidr": "192.0.2.2/24",
                    "bridge_stp": "off",
                    "bridge_fd": "0",
                },
            },
        )

    # ------------------------------------------------------------- network

    def _routes_tv_network(self):
        n = "/nodes/{node}/network"
        return [
            ("GET", n, self._tv_net_list),
            ("POST", n, self._tv_net_create),
            ("PUT", n, self._tv_net_reload),
            ("DELETE", n, self._tv_net_revert),
            ("GET", n + "/{iface}", self._tv_net_read),
            ("PUT", n + "/{iface}", self._tv_net_update),
            ("DELETE", n + "/{iface}", self._tv_net_delete),
        ]

    def _ifaces(self, node):
        return self.tv_net.setdefault(node, {})

    @staticmethod
    def _net_view(iface, cfg):
        out = dict(cfg, iface=iface, active=1, families=["inet"])
        out.setdefault("method", "static" if cfg.get("cidr") else "manual")
        for k in ("mtu",):
            if k in out:
                out[k] = str(out[k])
        return out

    async def _tv_net_list(self, v, user):
        kind = v.get("type")
        return [
            self._net_view(i, c)
            for i, c in sorted(self._ifaces(v["node"]).items())
            if kind is None
            or c.get("type") == kind
            or (kind == "any_bridge" and c.get("type") in ("bridge", "OVSBridge"))
        ]

    async def _tv_net_read(self, v, user):
        cfg = self._ifaces(v["node"]).get(v["iface"])
        if cfg is None:
            raise die("interface does not exist")
        return self._net_view(v["iface"], cfg)

    def _net_params(self, v):
        return {k: x for k, x in v.items() if k not in NET_SKIP and x is not None}

    async def _tv_net_create(self, v, user):
        ifaces = self._ifaces(v["node"])
        if v["iface"] in ifaces:
            raise die("interface '{}' already exists".format(v["iface"]))
        ifaces[v["iface"]] = self._net_params(v)

    async def _tv_net_update(self, v, user):
        ifaces = self._ifaces(v["node"])
        if v["iface"] not in ifaces:
            raise die("interface does not exist")
        cfg = ifaces[v["iface"]]
        for k in split_list(v.get("delete")):
            cfg.pop(k, None)
        cfg.update(self._net_params(v))

    async def _tv_net_delete(self, v, user):
        if self._ifaces(v["node"]).pop(v["iface"], None) is None:
            raise die("interface does not exist")

    async def _tv_net_reload(self, v, user):
        async def body():
            return None

        return await self.task(v["node"], "srvreload", "networking", user or "root@pam", body)

    async def _tv_net_revert(self, v, user):
        return None

    # -------------------------------------------------------------- access

    def _routes_tv_access(self):
        return [
            ("GET", "/access/roles", self._tv_role_list),
            ("POST", "/access/roles", self._tv_role_create),
            ("GET", "/access/roles/{roleid}", self._tv_role_read),
            ("PUT", "/access/roles/{roleid}", self._tv_role_update),
            ("DELETE", "/access/roles/{roleid}", self._tv_role_delete),
            ("GET", "/access/users", self._tv_user_list),
            ("POST", "/access/users", self._tv_user_create),
            ("GET", "/access/users/{userid}", self._tv_user_read),
            ("PUT", "/access/users/{userid}", self._tv_user_update),
            ("DELETE", "/access/users/{userid}", self._tv_user_delete),
            ("GET", "/access/acl", self._tv_acl_list),
            ("PUT", "/access/acl", self._tv_acl_update),
            ("GET", "/access/users/{userid}/token", self._tv_token_list),
            ("GET", "/access/users/{userid}/token/{tokenid}", self._tv_token_read),
            ("POST", "/access/users/{userid}/token/{tokenid}", self._tv_token_create),
            ("PUT", "/access/users/{userid}/token/{tokenid}", self._tv_token_update),
            ("DELETE", "/access/users/{userid}/token/{tokenid}", self._tv_token_delete),
        ]

    def _role(self, roleid):
        if roleid not in self.tv_roles:
            raise die(f"role '{roleid}' does not exist")
        return self.tv_roles[roleid]

    async def _tv_role_list(self, v, user):
        return [{"roleid": r, "privs": ",".join(sorted(p)), "special": 0} for r, p in sorted(self.tv_roles.items())]

    async def _tv_role_create(self, v, user):
        if v["roleid"] in self.tv_roles:
            raise die("role '{}' already exists".format(v["roleid"]))
        self.tv_roles[v["roleid"]] = set(split_list(v.get("privs")))

    async def _tv_role_read(self, v, user):
        return dict.fromkeys(sorted(self._role(v["roleid"])), 1)

    async def _tv_role_update(self, v, user):
        privs = set(split_list(v.get("privs")))
        if v.get("append"):
            self._role(v["roleid"]).update(privs)
        else:
            self._role(v["roleid"])
            self.tv_roles[v["roleid"]] = privs
        self._tv_regrant()

    async def _tv_role_delete(self, v, user):
        self._role(v["roleid"])
        del self.tv_roles[v["roleid"]]

    def _user(self, userid):
        if userid not in self.tv_users:
            raise die(f"no such user ('{userid}')")
        return self.tv_users[userid]

    def _user_view(self, userid, listing=False):
        u = self.tv_users[userid]
        out = {k: x for k, x in u.items() if x not in ("", None) and k != "groups"}
        out["groups"] = ",".join(u.get("groups") or []) if listing else list(u.get("groups") or [])
        if not out["groups"]:
            out.pop("groups")
        toks = {t: dict(i) for (uid, t), i in self.tv_tokens.items() if uid == userid}
        if listing:
            out["userid"] = userid
            out["tokens"] = [dict(i, tokenid=t) for t, i in sorted(toks.items())]
        elif toks:
            out["tokens"] = toks
        return out

    async def _tv_user_list(self, v, user):
        return [self._user_view(u, True) for u in sorted(self.tv_users)]

    async def _tv_user_create(self, v, user):
        uid = v["userid"]
        if uid in self.tv_users:
            raise die(f"create user failed: user '{uid}' already exists")
        rec = {k: v[k] for k in USER_FIELDS if k in v}
        rec["groups"] = split_list(rec.get("groups"))
        rec.setdefault("enable", 1)
        rec.setdefault("expire", 0)
        self.tv_users[uid] = rec
        if v.get("password"):
            self.users[uid] = v["password"]

    async def _tv_user_read(self, v, user):
        self._user(v["userid"])
        return self._user_view(v["userid"])

    async def _tv_user_update(self, v, user):
        rec = self._user(v["userid"])
        for k in USER_FIELDS:
            if k in v:
                if k == "groups":
                    groups = split_list(v[k])
                    rec[k] = sorted(set(rec.get(k) or []) | set(groups)) if v.get("append") else groups
                else:
                    rec[k] = v[k]

    async def _tv_user_delete(self, v, user):
        uid = v["userid"]
        self._user(uid)
        del self.tv_users[uid]
        self.users.pop(uid, None)
        for key in [k for k in self.tv_tokens if k[0] == uid]:
            del self.tv_tokens[key]
            self.apitokens.pop("{}!{}".format(*key), None)
        self.tv_acl = [e for e in self.tv_acl if e["ugid"].split("!")[0] != uid]
        self._tv_regrant()

    async def _tv_acl_list(self, v, user):
        return [dict(e) for e in self.tv_acl]

    async def _tv_acl_update(self, v, user):
        roles = split_list(v.get("roles"))
        who = (
            [("user", u) for u in split_list(v.get("users"))]
            + [("group", g) for g in split_list(v.get("groups"))]
            + [("token", t) for t in split_list(v.get("tokens"))]
        )
        for role in roles:
            if role not in self.tv_roles and role not in ("Administrator", "PVEAdmin", "PVEAuditor", "NoAccess"):
                raise die(f"role '{role}' does not exist")
        for kind, ugid in who:
            for role in roles:
                self.tv_acl = [
                    e for e in self.tv_acl if not (e["path"] == v["path"] and e["ugid"] == ugid and e["roleid"] == role)
                ]
                if not v.get("delete"):
                    self.tv_acl.append(
                        {
                            "path": v["path"],
                            "type": kind,
                            "ugid": ugid,
                            "roleid": role,
                            "propagate": 0 if v.get("propagate") == 0 else 1,
                        }
                    )
        self._tv_regrant()

    def _tv_regrant(self):
        """Mirror the ACL into fakepve's permission model (pve.acl), so tokens/users are really checked."""
        if not self.tv_acl:
            return
        self.acl = {}
        for e in self.tv_acl:
            privs = self.tv_roles.get(e["roleid"])
            if privs is None:
                continue
            self.grant(e["ugid"], e["path"], *privs)

    def _token(self, v):
        key = (v["userid"], v["tokenid"])
        if key not in self.tv_tokens:
            raise die("no such token '{1}' for user '{0}'".format(*key))
        return key

    async def _tv_token_list(self, v, user):
        self._user(v["userid"])
        return [dict(i, tokenid=t) for (u, t), i in sorted(self.tv_tokens.items()) if u == v["userid"]]

    async def _tv_token_read(self, v, user):
        return dict(self.tv_tokens[self._token(v)])

    async def _tv_token_create(self, v, user):
        self._user(v["userid"])
        key = (v["userid"], v["tokenid"])
        if key in self.tv_tokens:
            raise die("Token already exists.")
        info = {"privsep": 1 if v.get("privsep") is None else int(v["privsep"]), "expire": int(v.get("expire") or 0)}
        if v.get("comment"):
            info["comment"] = v["comment"]
        self.tv_tokens[key] = info
        full = "{}!{}".format(*key)
        secret = str(uuid.uuid4())
        self.apitokens[full] = secret
        return {"full-tokenid": full, "info": dict(info), "value": secret}

    async def _tv_token_update(self, v, user):
        key = self._token(v)
        info = self.tv_tokens[key]
        for k in split_list(v.get("delete")):
            info.pop(k, None)
        for k in ("comment", "expire", "privsep"):
            if v.get(k) is not None:
                info[k] = v[k]
        out = dict(info)
        if v.get("regenerate"):
            full = "{}!{}".format(*key)
            self.apitokens[full] = out["value"] = str(uuid.uuid4())
            out["full-tokenid"] = full
        return out

    async def _tv_token_delete(self, v, user):
        key = self._token(v)
        del self.tv_tokens[key]
        self.apitokens.pop("{}!{}".format(*key), None)

    # ------------------------------------------------------ trailing slash
    # bpg deletes a VM with `DELETE /nodes/{node}/qemu/{vmid}/`. PVE accepts the trailing slash; fakepve's router
    # does not, so the request reaches the catch-all, which answers with a task that does nothing, and bpg then
    # waits for ever for the VM to disappear. Re-dispatch such requests without the slash.

    async def _generic(self, request):
        from fakepve.server import USER

        path = request.rel_url.path
        if path.endswith("/") and path.count("/") > 3:
            clone = request.clone(rel_url=request.rel_url.with_path(path.rstrip("/")))
            match = await request.app.router.resolve(clone)
            if getattr(match.handler, "__name__", "") != "_generic":
                clone[USER] = request[USER]
                clone._match_info = match
                match.add_app(request.app)
                return await match.handler(clone)
        return await super()._generic(request)

    # ------------------------------------------------------- qemu config
    # fakepve 0.5.0 stores PUT/POST /qemu/{vmid}/config values as the raw form strings (it validates
    # them but applies the unvalidated dict), so GET /config then answers "cores": "6" and bpg fails:
    # "json: cannot unmarshal string into Go struct field Alias.cores of type int64". Apply the typed values.

    async def _typed_config(self, request):
        from fakepve.server import params

        raw = await params(request)
        checked = self._verify(request, raw)
        return {k: checked.get(k, x) for k, x in raw.items()}

    async def _apply_config(self, vm, user, p):
        await super()._apply_config(vm, user, p)
        # PVE hot-plugs the network devices of a running VM (`hotplug` defaults to network,disk,usb) and writes
        # the value as `model=MAC,...`; fakepve 0.5.0 keeps every change of a running VM pending until a reboot,
        # which no NIC change triggers (bpg: "network devices can be hotplugged").
        if "network" in str(vm.config.get("hotplug", "network,disk,usb")).split(","):
            from fakepve.qemu import with_mac

            for key in [k for k, v in vm.pending.items() if re.fullmatch(r"net\d+", k) and v is not None]:
                vm.config[key] = with_mac(vm.pending.pop(key))

    async def _config_put(self, request):
        from fakepve.server import USER, ok

        p = await self._typed_config(request)
        vm = self._vm(request)
        await self._apply_config(vm, request[USER], p)
        return ok()

    async def _config_post(self, request):
        from fakepve.model import PveError, TaskError
        from fakepve.server import USER, ok

        p = await self._typed_config(request)
        vm = self._vm(request)
        user = request[USER]
        self.need_quorum()

        async def body():
            try:
                await self._apply_config(vm, user, p)
            except PveError as e:
                raise TaskError(e.message) from e

        return ok(await self.task(vm.node, "qmconfig", vm.vmid, user, body))

    # ----------------------------------------------------- cloud-init drive
    # PVE names a VM's cloud-init drive `<storage>:vm-<vmid>-cloudinit` (.qcow2 on file storages); fakepve 0.5.0
    # allocates it as an ordinary disk (vm-<vmid>-disk-<n>), and bpg, which finds the cloud-init drive by that
    # name, then reads no `initialization.datastore_id`/`interface` back and plans a change for ever.

    def _qm_new_drive(self, vmid, key, value, default):
        from fakepve.qemu import join_drive, split_drive, volume_ref

        result, made = super()._qm_new_drive(vmid, key, value, default)
        volume, _ = split_drive(value)
        if not volume.endswith(":cloudinit") or len(made) != 1:
            return result, made
        sid, old = volume_ref(made[0])
        store = self.storages[sid]
        suffix = "." + old.rsplit(".", 1)[1] if "." in old else ""
        name = f"vm-{vmid}-cloudinit{suffix}"
        store["volumes"][name] = store["volumes"].pop(old)
        _, props = split_drive(result)
        return join_drive(f"{sid}:{name}", props), [f"{sid}:{name}"]


class FakePveServer:
    """TvFakePve on `host:port` (loopback only) in a background thread; `call(fn, *args)` runs fn in its loop."""

    def __init__(self, host: str, port: int, pki: Path, nodes=("pve1", "pve2", "pve3")):  # the example site's hosts
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"fakepve must listen on loopback, not {host}")
        self.host, self.port, self.pki, self.nodes = host, port, pki, nodes
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.pve: TvFakePve | None = None
        self.cafile = ""

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}/"

    def start(self) -> FakePveServer:
        self.pki.mkdir(parents=True, exist_ok=True)
        certfile, keyfile, _ = make_cert(str(self.pki), hosts=(self.host,))
        self.cafile = certfile
        self.thread.start()

        async def boot():
            pve = TvFakePve(user="root@pam", password="secret", host=self.host, port=self.port)
            pve.time_scale = 0  # every task finishes before its request returns
            for node in self.nodes:
                pve.add_node(node)
            # PVE's default `local` storage lacks the 'import' content our Talos images and VM disks use.
            pve.storages["local"]["content"] = "iso,vztmpl,backup,import,snippets"
            await pve.start(certfile, keyfile)
            self.guest_agents = asyncio.ensure_future(self._guest_agents(pve))  # a reference keeps the task alive
            return pve

        self.pve = asyncio.run_coroutine_threadsafe(boot(), self.loop).result(timeout=30)
        return self

    @staticmethod
    async def _guest_agents(pve):
        # VMs created through the API have no agent in fakepve; our VMs enable the QEMU agent (the Talos image
        # carries it), and without an answering agent bpg waits agent.timeout (15 min) per VM.
        while True:
            for vm in pve.vms:
                if vm.agent is None:
                    vm.agent = {}
            await asyncio.sleep(0.05)

    def call(self, function, *args, **kwargs):
        """Runs `function(*args)` inside the server's loop (fakepve is not thread-safe) and returns its result."""

        async def run():
            return function(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def stop(self) -> None:
        if self.pve is not None:
            asyncio.run_coroutine_threadsafe(self.pve.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def provider_env(self) -> dict[str, str]:
        """How bpg/proxmox reaches the fake: credentials from the environment, the fake's CA trusted."""
        return {
            "PROXMOX_VE_ENDPOINT": self.url,
            "PROXMOX_VE_USERNAME": "root@pam",
            "PROXMOX_VE_PASSWORD": "secret",
            "SSL_CERT_FILE": self.cafile,
        }
