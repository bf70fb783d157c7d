"""One class per section of the spec: what it observes on the node, the changes that bring the node to the spec.

Each section's `plan` reads the node (files under the root, the managers' answers) and returns the changes still
needed — none when the node already matches, which is what makes a second run change nothing. A change is a line
that says what it does and a step that does it; a step's failure is a value (the line of the manager that failed),
so one failing section does not hide what the others did.

What the agent never does, on purpose: remove a package or a user that left the spec (a package may be a
dependency of another, a user's home holds data): a user that left loses what the agent gave it (sudo, its
managed authorized_keys); a package stays. Nor does it manage an account that exists on the node as a system account
(accounts.py), or follow a link it did not make (system.py): such an item is planned as a refused change — its
section fails, naming it, and the section's other items, and the other sections, are still applied.
"""

from __future__ import annotations

from terravixens.agent import units
from terravixens.agent.accounts import Account, accounts, memberships, refusals
from terravixens.agent.change import Change, Step, fail, refused
from terravixens.agent.desired import Desired, User
from terravixens.agent.network import NetworkSection
from terravixens.agent.system import INSTALL_TIMEOUT, Node, Refused

MANAGED = "# terravixens: managed by the agent from the spec; edits are replaced\n"
SUDOERS = "/etc/sudoers.d"
SUDO_PREFIX = "terravixens-"
SSHD_DROP_IN = "/etc/ssh/sshd_config.d/50-terravixens.conf"
HOST_KEYS_DONE = "/var/lib/terravixens/host-keys-regenerated"
PVE_SOURCES = "/etc/apt/sources.list.d/terravixens-pve.sources"
ENABLED = {"enabled", "enabled-runtime", "static", "alias", "indirect", "generated"}


def call(node: Node, *argv: str, timeout: float | None = None) -> Step:
    def step() -> str | None:
        ran = node.call(*argv, timeout=timeout) if timeout else node.call(*argv)
        return None if ran.ok else ran.reason

    return step


def write(node: Node, path: str, text: str, mode: int, owner: tuple[int, int] | None = None) -> Step:
    def step() -> None:
        node.write(path, text, mode, owner)

    return step


def directory(node: Node, path: str, owner: tuple[int, int]) -> Step:
    def step() -> None:
        node.directory(path, 0o700, owner)

    return step


def remove(node: Node, path: str) -> Step:
    def step() -> None:
        node.remove(path)

    return step


def steps(*each: Step) -> Step:
    def all_of() -> str | None:
        for step in each:
            failure = step()
            if failure:
                return failure
        return None

    return all_of


def _file_change(node: Node, path: str, text: str, mode: int, then: Step | None = None) -> list[Change]:
    current = node.read(path)
    if current == text and node.mode(path) == mode:
        return []
    verb = "create" if current is None else ("rewrite" if current != text else f"chmod {mode:o}")
    return [Change(f"{verb} {path}", steps(write(node, path, text, mode), *([then] if then else [])))]


class Hostname:
    name = "hostname"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        changes = []
        current = (node.read("/etc/hostname") or "").strip()
        if current != want.hostname:
            changes.append(
                Change(
                    f"hostname {current or '(none)'!s} -> {want.hostname}",
                    steps(
                        write(node, "/etc/hostname", f"{want.hostname}\n", 0o644), call(node, "hostname", want.hostname)
                    ),
                )
            )
        hosts = node.read("/etc/hosts") or ""
        line = (
            f"127.0.1.1\t{want.fqdn} {want.hostname}" if want.fqdn != want.hostname else f"127.0.1.1\t{want.hostname}"
        )
        kept = [entry for entry in hosts.splitlines() if not entry.startswith("127.0.1.1")]
        wanted = "\n".join([*kept, line]) + "\n"
        if hosts != wanted:
            changes.append(Change(f"/etc/hosts: {line.expandtabs(1)}", write(node, "/etc/hosts", wanted, 0o644)))
        return changes


class Users:
    name = "users"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        present, groups = accounts(node), memberships(node)
        system = refusals(node, [user.name for user in want.users])
        changes = []
        for user in want.users:
            account = present.get(user.name)
            if user.name in system:
                changes.append(refused(f"user {user.name}", system[user.name]))
                continue
            if account is None:
                argv = ["useradd", "--create-home", "--shell", user.shell]
                if user.groups:
                    argv += ["--groups", ",".join(user.groups)]
                changes.append(Change(f"add user {user.name}", call(node, *argv, user.name)))
                continue
            if account.shell != user.shell:
                changes.append(
                    Change(
                        f"user {user.name}: shell {account.shell} -> {user.shell}",
                        call(node, "usermod", "--shell", user.shell, user.name),
                    )
                )
            missing = [group for group in user.groups if group not in groups.get(user.name, set())]
            if missing:
                changes.append(
                    Change(
                        f"user {user.name}: join {', '.join(missing)}",
                        call(node, "usermod", "--append", "--groups", ",".join(missing), user.name),
                    )
                )
        return changes


class Sudo:
    name = "sudo"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        changes = []
        wanted = {f"{SUDO_PREFIX}{user.name}": user.name for user in want.users if user.sudo}
        system = refusals(node, list(wanted.values()))
        for file_name, user in sorted(wanted.items()):
            if user in system:
                changes.append(refused(f"sudo for {user}", system[user]))
                continue
            text = f"{MANAGED}{user} ALL=(ALL:ALL) NOPASSWD:ALL\n"
            changes += _file_change(node, f"{SUDOERS}/{file_name}", text, 0o440)
        present = [name for name in node.names(SUDOERS) if name.startswith(SUDO_PREFIX)]
        for file_name in present:
            if file_name not in wanted:
                path = f"{SUDOERS}/{file_name}"
                changes.append(Change(f"remove {path} (sudo revoked)", remove(node, path)))
        return changes


class Ssh:
    """The posture's sshd policy, then the users' authorized_keys (only the keys the spec names: the file is the
    agent's); a user that left the spec loses a file the agent wrote, never one it did not. Each user's files are
    reached without following a link (`~/.ssh -> /etc` is refused, naming it): the policy and the other users are
    still applied."""

    name = "ssh"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        policy = (
            f"{MANAGED}PasswordAuthentication {'yes' if want.password_authentication else 'no'}\n"
            f"PermitRootLogin {'prohibit-password' if want.permit_root_login else 'no'}\n"
        )
        reload = call(node, "systemctl", "try-reload-or-restart", "ssh.service")
        changes = _file_change(node, SSHD_DROP_IN, policy, 0o644, reload)
        present = accounts(node)
        system = refusals(node, [user.name for user in want.users])
        for user in want.users:
            account = present.get(user.name)
            if user.name in system:
                changes.append(refused(f"authorized_keys of {user.name}", system[user.name]))
                continue
            if account is None:  # the users section adds it first; planned again after users applied
                changes.append(Change(f"authorized_keys of {user.name}", fail(f"user {user.name} does not exist")))
                continue
            try:
                changes += self._keys(node, user, account)
            except Refused as error:
                changes.append(refused(f"authorized_keys of {user.name}", str(error)))
        wanted = {user.name for user in want.users}
        for name, account in sorted(present.items()):
            path = f"{account.home}/.ssh/authorized_keys"
            if name in wanted or not account.home.startswith("/home/"):
                continue
            try:
                current = node.read(path)
            except Refused:
                # Not a file the agent wrote where it wrote it (a link, a FIFO…): nothing of its own to take back.
                # Any local user may link ~/.ssh elsewhere; that must not fail the section on every run.
                continue
            if (current or "").startswith(MANAGED):
                changes.append(Change(f"remove authorized_keys of {name} (left the spec)", remove(node, path)))
        return changes

    @staticmethod
    def _keys(node: Node, user: User, account: Account) -> list[Change]:
        folder = f"{account.home}/.ssh"
        path = f"{folder}/authorized_keys"
        text = MANAGED + "".join(f"{key}\n" for key in user.keys)
        if node.read(path) == text and node.mode(path) == 0o600 and node.mode(folder) == 0o700:
            return []
        owner = (account.uid, account.gid)
        return [
            Change(
                f"authorized_keys of {user.name}: {len(user.keys)} key(s)",
                steps(directory(node, folder, owner), write(node, path, text, 0o600, owner)),
            )
        ]


class Packages:
    name = "packages"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        if not want.packages:
            return []
        # dpkg-query exits 1 when one of the names is unknown to dpkg: its lines for the others are still printed.
        ran = node.call("dpkg-query", "--show", "--showformat=${Package}\t${db:Status-Abbrev}\n", *want.packages)
        if ran.returncode is None:
            return [Change("read installed packages", lambda: ran.reason)]
        installed = {
            line.split("\t")[0] for line in ran.stdout.splitlines() if "\t" in line and line.split("\t")[1][:2] == "ii"
        }
        missing = [package for package in want.packages if package not in installed]
        if not missing:
            return []
        install = ("apt-get", "-q", "-y", "--no-install-recommends", "-o", "Dpkg::Options::=--force-confold", "install")
        return [
            Change(
                f"install {' '.join(missing)}",
                steps(
                    call(node, "apt-get", "-q", "update", timeout=INSTALL_TIMEOUT),
                    call(node, *install, *missing, timeout=INSTALL_TIMEOUT),
                ),
            )
        ]


def _unit_state(node: Node, unit: str) -> tuple[str, bool]:
    """(`systemctl is-enabled` word, is it active): 'not-found' when systemd knows no such unit."""
    enabled = node.call("systemctl", "is-enabled", unit)
    word = enabled.stdout.strip().splitlines()[0] if enabled.stdout.strip() else "not-found"
    active = node.call("systemctl", "is-active", "--quiet", unit)
    return word, active.returncode == 0


class Services:
    name = "services"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        changes = []
        for unit in want.enable:
            word, active = _unit_state(node, unit)
            if word not in ENABLED or not active:
                changes.append(
                    Change(
                        f"enable --now {unit} (was {word}, {'active' if active else 'inactive'})",
                        call(node, "systemctl", "enable", "--now", unit),
                    )
                )
        for unit in want.disable:
            word, active = _unit_state(node, unit)
            if word == "not-found" and not active:
                continue  # nothing to stop: the package that ships it is not installed
            if word in ENABLED - {"static"} or active:
                changes.append(
                    Change(
                        f"disable --now {unit} (was {word}, {'active' if active else 'inactive'})",
                        call(node, "systemctl", "disable", "--now", unit),
                    )
                )
        return changes


class TypeConfig:
    """Settings of the node's type: a container's ssh host keys made anew once (containers from one template share
    them), a nested Proxmox VE host's package repository."""

    name = "config"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        regenerate = want.config.get("regenerate_host_keys", True)
        if want.node_type == "ct" and regenerate and node.read(HOST_KEYS_DONE) is None:
            return [Change("regenerate ssh host keys (once)", lambda: self._host_keys(node))]
        if want.node_type == "pve":
            return self._repository(node, want.config.get("repository", "no-subscription"))
        return []

    def _host_keys(self, node: Node) -> str | None:
        for key in node.names("/etc/ssh"):
            if key.startswith("ssh_host_"):
                node.remove(f"/etc/ssh/{key}")
        # -A makes every missing host key type; -f PREFIX: under the root, not the machine's /etc/ssh.
        failure = call(node, "ssh-keygen", "-A", "-f", str(node.root))()
        if failure:
            return failure
        node.write(HOST_KEYS_DONE, "done\n", 0o600)
        return None

    def _repository(self, node: Node, repository: str) -> list[Change]:
        if repository == "none":
            if node.read(PVE_SOURCES) is None:
                return []
            return [Change(f"remove {PVE_SOURCES}", remove(node, PVE_SOURCES))]
        release = dict(line.split("=", 1) for line in _os_release(node).splitlines() if "=" in line)
        suite = release.get("VERSION_CODENAME", "").strip('"') or "trixie"
        uri, component = {
            "no-subscription": ("http://download.proxmox.com/debian/pve", "pve-no-subscription"),
            "enterprise": ("https://enterprise.proxmox.com/debian/pve", "pve-enterprise"),
        }[repository]
        text = (
            f"{MANAGED}Types: deb\nURIs: {uri}\nSuites: {suite}\nComponents: {component}\n"
            "Signed-By: /usr/share/keyrings/proxmox-archive-keyring.gpg\n"
        )
        return _file_change(node, PVE_SOURCES, text, 0o644)


def _os_release(node: Node) -> str:
    """/etc/os-release, or /usr/lib/os-release when it is missing (os-release(5)) or a link (Debian makes it one to
    ../usr/lib/os-release; the agent reads no file through a link)."""
    try:
        text = node.read("/etc/os-release")
    except Refused:
        text = None
    return text if text is not None else node.read("/usr/lib/os-release") or ""


class Run:
    """The spec's `run` as systemd units (units.py), enabled as the trigger asks."""

    name = "run"

    def plan(self, node: Node, want: Desired) -> list[Change]:
        reload = call(node, "systemctl", "daemon-reload")
        changes = _file_change(
            node, f"{units.UNIT_DIR}/{units.SERVICE}", units.service(want.trigger, want.interval), 0o644, reload
        )
        timer_path = f"{units.UNIT_DIR}/{units.TIMER}"
        if want.interval is not None:
            changes += _file_change(node, timer_path, units.timer(want.interval), 0o644, reload)
        wanted = {units.TIMER: want.trigger == "interval", units.SERVICE: want.trigger == "boot"}
        for unit, on in wanted.items():
            exists = node.read(f"{units.UNIT_DIR}/{unit}") is not None
            word = node.call("systemctl", "is-enabled", unit).stdout.strip() if exists else "not-found"
            # The timer is started too (first boot runs after timers.target: enabled alone, it would wait for the
            # next boot); the service is never started or stopped here — this run may be that service.
            now = ["--now"] if unit == units.TIMER else []
            if on and word != "enabled":
                changes.append(
                    Change(f"enable {' '.join([*now, unit])}", call(node, "systemctl", "enable", *now, unit))
                )
            elif not on and word == "enabled":
                changes.append(
                    Change(f"disable {' '.join([*now, unit])}", call(node, "systemctl", "disable", *now, unit))
                )
        if want.interval is None and node.read(timer_path) is not None:
            changes.append(Change(f"remove {timer_path}", steps(remove(node, timer_path), reload)))
        return changes


# The network after the services: a spec that points DNS at a local resolver installs and starts it first.
SECTIONS = (Hostname(), Users(), Sudo(), Ssh(), Packages(), Services(), NetworkSection(), TypeConfig(), Run())
__all__ = ["SECTIONS", "Change", "Step", "fail", "refused"]
