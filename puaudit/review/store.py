"""Where review decisions live: a SQLAlchemy 2 store, an SQLite file by default.

Location, first match wins:

1. the ``url`` given to :class:`ReviewStore` (any SQLAlchemy URL, e.g.
   ``postgresql+psycopg://user@host/db``),
2. ``$PUAUDIT_REVIEW_URL`` (the same, set by the operator),
3. ``$PUAUDIT_REVIEW_DB`` (a path to an SQLite file),
4. ``~/.puaudit/review.sqlite``.

Every decision is one row that is never updated or deleted: a reviewer who changes their mind
adds a later decision (the latest per reviewer and row counts), and two reviewers on one row are
two rows. Each carries a random ``uid`` so that importing the same export twice adds nothing.

SQLite runs in WAL mode with a busy timeout, and every write is one ``BEGIN IMMEDIATE``
transaction, so concurrent writers (threads, processes, two browser sessions) wait for each
other instead of failing or losing a decision. A locked, read-only or damaged file raises a
:class:`~puaudit.errors.PUAuditError` that says which file, what is wrong and what to do; the
store never rewrites or deletes an existing file, so decisions already made stay where they are.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from sqlalchemy import (DateTime, Float, Integer, String, Text, create_engine, event, func, insert,
                        select)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from puaudit.data.jsonsafe import to_jsonable
from puaudit.errors import PUAuditError
from puaudit.review import VERDICTS

__all__ = ["ReviewStore", "Decision", "get_store", "store_exists", "empty_decisions", "default_url",
           "DECISION_COLUMNS",
           "URL_ENV", "DB_ENV", "BUSY_TIMEOUT_S"]

URL_ENV = "PUAUDIT_REVIEW_URL"
DB_ENV = "PUAUDIT_REVIEW_DB"
#: Seconds a writer waits for another writer's lock before giving up with a clear message.
BUSY_TIMEOUT_S = float(os.environ.get("PUAUDIT_REVIEW_BUSY_S", "30"))
MAX_REVIEWER = 200
MAX_NOTE = 10_000

#: Columns of :meth:`ReviewStore.decisions` and of an export, in order.
DECISION_COLUMNS = ["uid", "row_key", "verdict", "reviewer", "note", "created_at", "dataset",
                    "judge_verdict", "p_judge_right", "audit_group", "settings"]


class Base(DeclarativeBase):
    pass


class Decision(Base):
    """One reviewer's verdict on one row (never updated; later decisions supersede)."""

    __tablename__ = "puaudit_review_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(32), unique=True)
    row_key: Mapped[str] = mapped_column(String(64), index=True)
    verdict: Mapped[str] = mapped_column(String(8))
    reviewer: Mapped[str] = mapped_column(String(MAX_REVIEWER), index=True)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    dataset: Mapped[str] = mapped_column(String(500), default="")
    judge_verdict: Mapped[str | None] = mapped_column(String(8), nullable=True)
    p_judge_right: Mapped[float | None] = mapped_column(Float, nullable=True)
    audit_group: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: the audit settings the decision was made under (AuditConfig.to_dict() as JSON)
    settings: Mapped[str] = mapped_column(Text, default="{}")


def empty_decisions() -> pd.DataFrame:
    """A decisions frame with no rows (the columns of :meth:`ReviewStore.decisions`)."""
    df = pd.DataFrame(columns=DECISION_COLUMNS)
    df["created_at"] = pd.to_datetime(df["created_at"], utc=True)
    return df


def default_url() -> str:
    """The store's URL from the environment, else ``~/.puaudit/review.sqlite``."""
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return url
    path = os.environ.get(DB_ENV, "").strip() or str(Path.home() / ".puaudit" / "review.sqlite")
    return "sqlite:///" + str(Path(path).expanduser())


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _check_verdict(verdict: str, where: str = "") -> str:
    v = str(verdict).strip()
    norm = {"a": "A", "b": "B", "tie": "tie", "skip": "skip"}.get(v.lower())
    if norm is None:
        raise PUAuditError(f"{where}unknown review verdict {v[:40]!r}: use one of {list(VERDICTS)}.",
                           column="verdict")
    return norm


def _check_reviewer(reviewer, where: str = "") -> str:
    name = "" if reviewer is None else str(reviewer).strip()
    if not name or name.lower() == "nan":
        raise PUAuditError(f"{where}a reviewer name is required (who made this decision?).",
                           column="reviewer")
    if len(name) > MAX_REVIEWER:
        raise PUAuditError(f"{where}the reviewer name is longer than {MAX_REVIEWER} characters.",
                           column="reviewer")
    return name


class ReviewStore:
    """Review decisions in a database (see the module docstring for the location).

    Parameters
    ----------
    url : str, optional
        A SQLAlchemy URL; default :func:`default_url`.
    create : bool, default True
        Create the folder, the file and the table when missing.
    """

    def __init__(self, url: str | None = None, *, create: bool = True):
        self.url = url or default_url()
        try:
            parsed = make_url(self.url)
        except ArgumentError:
            raise PUAuditError(f"The review database URL {self.url!r} is not a valid SQLAlchemy "
                               "URL (e.g. sqlite:///path/review.sqlite or "
                               "postgresql+psycopg://user@host/db).") from None
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self.path = parsed.database if self.is_sqlite else None
        #: shown in messages: the file, or the URL without its password
        self.location = (self.path or ":memory:") if self.is_sqlite else parsed.render_as_string(
            hide_password=True)
        if self.is_sqlite and self.path and self.path != ":memory:" and create \
                and not self.path.startswith("file:"):
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise PUAuditError(f"Cannot create the folder of the review database "
                                   f"{self.location}: {exc.strerror}. Set {DB_ENV} to a "
                                   "writable path.") from None
        kwargs: dict = {}
        if self.is_sqlite:
            kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
        try:
            self.engine = create_engine(self.url, **kwargs)
        except (ArgumentError, ImportError) as exc:
            raise PUAuditError(f"Cannot open the review database {self.location}: {exc}. Install "
                               "its driver or check the URL.") from None
        if self.is_sqlite:
            _sqlite_setup(self.engine)
        with self._guard("open"):
            if create:
                Base.metadata.create_all(self.engine)
            else:
                with self.engine.connect() as conn:
                    conn.execute(select(func.count()).select_from(Decision))

    # -- errors ------------------------------------------------------------------------------
    def _guard(self, action: str):
        return _Guard(self, action)

    def explain(self, exc: BaseException, action: str) -> PUAuditError:
        """A :class:`PUAuditError` for a database error, saying what is wrong and what to do."""
        text = str(getattr(exc, "orig", None) or exc)
        low = text.lower()
        where = f"The review database {self.location}"
        if "locked" in low or "busy" in low:
            msg = (f"{where} is locked: another program has held it for more than "
                   f"{BUSY_TIMEOUT_S:.0f} s (an open sqlite3 shell, a backup, a stuck process?). "
                   "Decisions already saved are safe; the one you just made was not saved. Close "
                   "the other program and try again.")
            kind = "locked"
        elif "readonly" in low or "read-only" in low or "read only" in low:
            msg = (f"{where} is read-only (file or folder permissions, or a read-only mount): "
                   "decisions can be read but not saved. Make the file and its folder writable, "
                   f"or set {DB_ENV} to a writable path and import an export there.")
            kind = "read-only"
        elif ("not a database" in low or "malformed" in low or "corrupt" in low
              or "file is encrypted" in low):
            msg = (f"{where} is not a valid SQLite database (damaged, or another kind of file). "
                   "It was left untouched. Move it aside or restore a backup (`sqlite3 FILE "
                   f"\".recover\"` may save its decisions), or set {DB_ENV} to a new file.")
            kind = "corrupt"
        elif "unable to open" in low:
            msg = (f"{where} cannot be opened (missing folder or no permission). Set {DB_ENV} "
                   "to a path this server can write.")
            kind = "unavailable"
        else:
            msg = f"{where} failed while trying to {action}: {text[:300]}"
            kind = "error"
        err = PUAuditError(msg)
        err.kind = kind
        return err

    # -- writing -----------------------------------------------------------------------------
    def add(self, row_key: str, verdict: str, reviewer: str, *, note: str = "",
            settings: dict | None = None, dataset: str = "", judge_verdict: str | None = None,
            p_judge_right: float | None = None, audit_group: str | None = None,
            created_at: datetime | None = None, uid: str | None = None) -> dict:
        """Save one decision; returns it as a dict (with its ``uid`` and ``created_at``)."""
        rec = {"uid": uid, "row_key": row_key, "verdict": verdict, "reviewer": reviewer,
               "note": note, "settings": settings, "dataset": dataset,
               "judge_verdict": judge_verdict, "p_judge_right": p_judge_right,
               "audit_group": audit_group, "created_at": created_at}
        (saved,) = self._clean([rec])
        self._write([saved])
        return saved

    def add_many(self, records) -> int:
        """Save many decisions in one transaction; decisions whose ``uid`` is already stored are
        left out (importing one export twice adds nothing). Returns how many were added."""
        rows = self._clean(list(records))
        return self._write(rows)

    def _clean(self, records: list[dict]) -> list[dict]:
        out = []
        for i, r in enumerate(records):
            where = f"decision {i + 1}: " if len(records) > 1 else ""
            key = str(r.get("row_key") or "").strip()
            if not key or len(key) > 64:
                raise PUAuditError(f"{where}row_key is missing or longer than 64 characters.",
                                   column="row_key", row=i + 1)
            created = r.get("created_at")
            if created is None or (isinstance(created, float) and created != created):
                created = _now()
            else:
                try:
                    created = pd.Timestamp(created)
                except (ValueError, TypeError):
                    raise PUAuditError(f"{where}created_at {str(created)[:40]!r} is not a date "
                                       "and time (ISO 8601, e.g. 2026-01-31T12:00:00Z).",
                                       column="created_at", row=i + 1) from None
                created = (created.tz_localize("UTC") if created.tzinfo is None
                           else created.tz_convert("UTC")).to_pydatetime()
            settings = r.get("settings")
            if isinstance(settings, str):
                settings_text = settings or "{}"
            else:
                settings_text = json.dumps(to_jsonable(settings or {}), sort_keys=True)
            p = r.get("p_judge_right")
            p = None if p is None or (isinstance(p, float) and p != p) else float(p)
            note = "" if r.get("note") is None or r.get("note") != r.get("note") else str(r["note"])
            out.append({
                "uid": str(r.get("uid") or uuid.uuid4().hex),
                "row_key": key,
                "verdict": _check_verdict(r.get("verdict", ""), where),
                "reviewer": _check_reviewer(r.get("reviewer"), where),
                "note": note[:MAX_NOTE],
                "created_at": created,
                "dataset": str(r.get("dataset") or "")[:500],
                "judge_verdict": None if r.get("judge_verdict") in (None, "") or
                r.get("judge_verdict") != r.get("judge_verdict") else str(r["judge_verdict"])[:8],
                "p_judge_right": p,
                "audit_group": None if r.get("audit_group") in (None, "") or
                r.get("audit_group") != r.get("audit_group") else str(r["audit_group"])[:32],
                "settings": settings_text,
            })
        return out

    def _write(self, rows: list[dict]) -> int:
        if not rows:
            return 0
        with self._guard("save decisions"):
            with self.engine.connect() as conn:
                conn = conn.execution_options(puaudit_write=True)
                with conn.begin():
                    uids = [r["uid"] for r in rows]
                    known = set()
                    for i in range(0, len(uids), 500):
                        known |= set(conn.execute(select(Decision.uid).where(
                            Decision.uid.in_(uids[i:i + 500]))).scalars())
                    new = [r for r in rows if r["uid"] not in known]
                    seen: set = set()
                    new = [r for r in new if not (r["uid"] in seen or seen.add(r["uid"]))]
                    if new:
                        conn.execute(insert(Decision), new)
        return len(new)

    # -- reading -----------------------------------------------------------------------------
    def decisions(self, keys=None, *, reviewer: str | None = None) -> pd.DataFrame:
        """Decisions (all, or those on ``keys`` / by ``reviewer``) oldest first, as a frame with
        :data:`DECISION_COLUMNS`; ``created_at`` in UTC."""
        q = select(*[getattr(Decision, c) for c in DECISION_COLUMNS]).order_by(
            Decision.created_at, Decision.id)
        if reviewer is not None:
            q = q.where(Decision.reviewer == reviewer)
        rows: list = []
        with self._guard("read decisions"):
            with self.engine.connect() as conn:
                wanted = None if keys is None else {str(k) for k in keys}
                if wanted is None or len(wanted) > 2000:  # one scan, filtered here
                    rows = conn.execute(q).all()
                    if wanted is not None:
                        rows = [r for r in rows if r.row_key in wanted]
                else:
                    keys = sorted(wanted)
                    for i in range(0, len(keys), 500):
                        rows += conn.execute(q.where(Decision.row_key.in_(keys[i:i + 500]))).all()
        df = pd.DataFrame([tuple(r) for r in rows], columns=DECISION_COLUMNS)
        if len(df):
            df["created_at"] = pd.to_datetime(df["created_at"], utc=True)
            df = df.sort_values("created_at", kind="stable").reset_index(drop=True)
        else:
            df["created_at"] = pd.to_datetime(df["created_at"], utc=True)
        return df

    def count(self) -> int:
        with self._guard("count decisions"):
            with self.engine.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(Decision)).scalar_one())

    def dispose(self) -> None:
        """Close every pooled connection (the file stays as it is)."""
        self.engine.dispose()


class _Guard:
    def __init__(self, store: ReviewStore, action: str):
        self.store, self.action = store, action

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        if exc is None or isinstance(exc, PUAuditError):
            return False
        if isinstance(exc, (DBAPIError, SQLAlchemyError)):
            raise self.store.explain(exc, self.action) from None
        return False


def _sqlite_setup(engine) -> None:
    """WAL, a busy timeout, and BEGIN IMMEDIATE for writes (readers never block writers; two
    writers queue instead of failing with 'database is locked' on a stale snapshot)."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            try:
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
            except Exception:  # a read-only file: it stays readable in its own journal mode
                pass
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        write = conn.get_execution_options().get("puaudit_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


_STORES: dict[str, ReviewStore] = {}
_LOCK = threading.Lock()


def get_store(url: str | None = None) -> ReviewStore:
    """One :class:`ReviewStore` per URL and process (its engine pools the connections)."""
    url = url or default_url()
    with _LOCK:
        store = _STORES.get(url)
        if store is None:
            store = ReviewStore(url)
            _STORES[url] = store
        return store


def store_exists(url: str | None = None) -> bool:
    """False only for an SQLite file that does not exist yet (nothing to read; readers such as
    the Export page then create nothing)."""
    url = url or default_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        return True  # let the store say what is wrong
    if parsed.get_backend_name() != "sqlite":
        return True
    db = parsed.database or ""
    if not db or db == ":memory:" or db.startswith("file:"):
        return True
    return Path(db).exists()
