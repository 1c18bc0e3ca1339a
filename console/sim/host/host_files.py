"""The simulated host's own files: env files and drop-ins the console writes, under the state dir.

An absolute path on the simulated host (`/etc/serve-console/k26.env`) lives under
`<state>/hosts/<host>/files/`, and never outside it. A unit reads its layout from these files the way
systemd does: an `EnvironmentFile=` when it starts, a drop-in only after a daemon-reload.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from console.config import DROP_IN, ENV_FILE, HostConfig
from console.errors import HostError
from console.sim.host import units as sim_units
from console.sim.systemd import restart_settings, write_loaded


class SimHostFiles:
    """One simulated host's file tree, and the unit environment read from it."""

    def __init__(self, cfg: HostConfig, host_root: Path) -> None:
        self.cfg = cfg
        self.root = host_root
        self.files_dir = host_root / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)

    def host_path(self, path: str) -> Path:
        """Where an absolute path on the simulated host lives in the state dir; never outside it.

        Raises:
            HostError: the path (through `..` or a symlink) leads out of the host's files dir.
        """
        target = self.files_dir / path.lstrip("/")
        root = self.files_dir.resolve()
        if not target.resolve().is_relative_to(root):
            raise HostError(self.cfg.name, f"refusing {path!r}: it leads outside the simulated host's files")
        return target

    async def read_file(self, path: str) -> str | None:
        """A file on the simulated host, or None if it does not exist."""
        try:
            return self.host_path(path).read_text(errors="replace")
        except FileNotFoundError:
            return None

    async def write_file(self, path: str, content: str) -> None:
        """Replace the file atomically, keeping an existing file's mode (and owner, where allowed)."""
        target = self.host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(content)
            with contextlib.suppress(FileNotFoundError):
                before = target.stat()
                os.chmod(tmp, stat.S_IMODE(before.st_mode))
                with contextlib.suppress(PermissionError):
                    os.chown(tmp, before.st_uid, before.st_gid)
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise HostError(self.cfg.name, f"cannot write {path}: {exc.strerror or exc}") from None

    def reload_drop_ins(self) -> None:
        """Drop-ins take effect only now, as with systemd's daemon-reload: the layout's environment, and
        every unit's `Restart=`/`RestartSec=` (a template's `NAME@.service.d/` applies to each instance)."""
        loaded = {
            s.unit: sim_units.load_drop_ins(self.files_dir, s.unit)
            for s in self.cfg.services
            if s.mapping == DROP_IN and s.unit
        }
        sim_units.save_loaded_drop_ins(self.root / "loaded-drop-ins.json", loaded)
        for unit in {u for s in self.cfg.services for u in s.all_units()}:
            write_loaded(self.root / "units" / unit, restart_settings(self._drop_in_texts(unit)))

    def _drop_in_texts(self, unit: str) -> list[str]:
        """The unit's drop-ins, its template's first, each folder's files in name order."""
        stem, at, instance = unit.partition("@")
        folders = [f"{stem}@.{instance.rpartition('.')[2]}.d"] if at else []  # sim-k26@.service.d
        folders.append(f"{unit}.d")
        texts = []
        for folder in folders:
            path = self.files_dir / "etc/systemd/system" / folder
            if path.is_dir():
                texts += [conf.read_text(errors="replace") for conf in sorted(path.glob("*.conf"))]
        return texts

    def layout_args(self, spec: sim_units.UnitSpec) -> tuple[list[str], dict[str, str]]:
        """The engine flags of a unit's layout, and the environment its files add.

        Raises:
            HostError: an env-file unit whose file is missing, as systemd refuses to start it.
        """
        unit_env: dict[str, str] = {}
        if spec.layout is not None:
            layout_args = sim_units.layout_args_for(spec)
            cluster = spec.service.cluster
            if cluster is not None:  # EnvironmentFile=-NODE_FILE: optional, as the dash says
                with contextlib.suppress(FileNotFoundError):
                    text = self.host_path(cluster.node_env_file).read_text(errors="replace")
                    unit_env = sim_units.parse_env_file(text)
        elif spec.service.mapping == ENV_FILE:
            assert spec.service.env_file is not None
            path = self.host_path(spec.service.env_file)
            try:
                unit_env = sim_units.parse_env_file(path.read_text(errors="replace"))
            except FileNotFoundError:
                raise HostError(
                    self.cfg.name, f"{spec.unit}: Failed to load environment files: {spec.service.env_file}"
                ) from None
            layout_args = sim_units.layout_args_from_env(self.cfg, spec, unit_env, spec.service.env_file)
        else:
            loaded = sim_units.read_loaded_drop_ins(self.root / "loaded-drop-ins.json")
            unit_env = loaded.get(spec.unit, {})
            layout_args = sim_units.layout_args_from_env(self.cfg, spec, unit_env, "its drop-in")
        return layout_args, unit_env
