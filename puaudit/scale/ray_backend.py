"""Ray itself: import it with a clear message when it is missing, connect or start it.

Ray is an optional extra. ``require_ray`` is the one place that imports it, so every entry
point (``PUAudit(backend="ray")``, ``puaudit audit --ray``) says the same thing when it is
absent, and the local path never imports it.
"""

from __future__ import annotations

from puaudit.errors import PUAuditError

__all__ = ["require_ray", "connect", "cluster_gpus", "INSTALL_HINT"]

INSTALL_HINT = ("The Ray backend needs Ray, which is an optional extra: pip install -e .[ray] "
                "(or pip install 'ray[data]>=2.9'). Without it, leave the backend at its default "
                "(local) or drop --ray.")


def require_ray():
    """Return the ``ray`` module, or raise :class:`PUAuditError` saying how to install it.

    Raises
    ------
    PUAuditError
        Ray (or Ray Data) is not installed.
    """
    try:
        import ray
        import ray.data  # noqa: F401  (the embedding stage needs Ray Data, not only Ray core)
    except ImportError as exc:
        raise PUAuditError(f"{INSTALL_HINT} ({exc})") from None
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None):
    """Connect to a Ray cluster, or start a local one; no-op when Ray is already initialised.

    Parameters
    ----------
    address : str, optional
        ``None`` or ``"auto"``: the cluster named by ``$RAY_ADDRESS`` or started on this machine
        with ``ray start --head``, else a new local instance. Otherwise a cluster address
        (``HOST:6379``, ``ray://HOST:10001``).
    num_cpus : int, optional
        CPUs of a newly started local instance (ignored when connecting to a cluster).

    Returns
    -------
    ray : module
        The initialised ``ray`` module.

    Raises
    ------
    PUAuditError
        Ray is missing, or the address cannot be reached.
    """
    ray = require_ray()
    if ray.is_initialized():
        return ray
    kwargs = {"ignore_reinit_error": True, "log_to_driver": True}
    if address not in (None, "", "auto"):
        _check_reachable(address)  # Ray itself retries an unreachable address for minutes
        kwargs["address"] = address
    elif num_cpus is not None:
        kwargs["num_cpus"] = int(num_cpus)
    try:
        ray.init(**kwargs)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        where = f"the Ray cluster at {address!r}" if "address" in kwargs else "Ray"
        raise PUAuditError(
            f"Could not start or reach {where}: {exc}. Start a cluster with `ray start --head` "
            "(see docs/ray.md) and pass its address (--ray HOST:6379), or omit the address to "
            "start a local instance.") from None
    return ray


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """Raise :class:`PUAuditError` at once when ``HOST:PORT`` (or ``ray://HOST:PORT``) does not
    accept a TCP connection; other forms (``local``, a path) are left to Ray."""
    import re
    import socket

    m = re.fullmatch(r"(?:ray://)?\[?([^\[\]/]+?)\]?:(\d+)", address.strip())
    if m is None:
        return
    host, port = m.group(1), int(m.group(2))
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise PUAuditError(
            f"No Ray cluster answers at {address!r} ({exc.strerror or exc}). Start one with "
            "`ray start --head` on that machine (see docs/ray.md), check the host and port "
            "(6379 by default; ray:// addresses use the client port, 10001), or omit the "
            "address to start a local instance.") from None


def cluster_gpus() -> float:
    """GPUs the connected cluster offers (0 on a CPU-only cluster)."""
    ray = require_ray()
    return float(ray.cluster_resources().get("GPU", 0.0))


def cluster_cpus() -> float:
    """CPUs the connected cluster offers."""
    ray = require_ray()
    return float(ray.cluster_resources().get("CPU", 1.0))
