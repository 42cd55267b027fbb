"""Where review decisions live: a SQLAlchemy 2 store, an SQLite file by default.

Location, first match wins: the ``url`` given to :class:`ReviewStore`, ``$PUAUDIT_REVIEW_URL``,
``$PUAUDIT_REVIEW_DB`` (an SQLite path), ``~/.puaudit/review.sqlite``. Every decision is one row
never updated or deleted (the latest per reviewer and row counts), with a random ``uid`` so that
importing an export twice adds nothing. Every write is one ``BEGIN IMMEDIATE`` transaction
(SQLite in WAL mode with a busy timeout); an existing file is never rewritten; a file that cannot
be written opens read-only. Concurrency, locked and foreign files: docs/review.md. Every field is
checked by :mod:`puaudit.review.validate` before anything is saved.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import pandas as pd
from sqlalchemy import (DateTime, Float, Integer, String, Text, create_engine, event, func, insert,
                        inspect, literal, select, text)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from puaudit.errors import PUAuditError
from puaudit.review.validate import MAX_REVIEWER, clean_decisions

__all__ = ["ReviewStore", "Decision", "get_store", "store_exists", "empty_decisions", "default_url",
           "DECISION_COLUMNS",
           "URL_ENV", "DB_ENV", "OTHER_TABLES_ENV", "BUSY_TIMEOUT_S", "TABLE"]

URL_ENV = "PUAUDIT_REVIEW_URL"
DB_ENV = "PUAUDIT_REVIEW_DB"
#: Seconds a writer waits for another writer's lock before giving up with a clear message.
BUSY_TIMEOUT_S = float(os.environ.get("PUAUDIT_REVIEW_BUSY_S", "30"))
#: Set to 1 to let the store share an SQLite file with another application's tables.
OTHER_TABLES_ENV = "PUAUDIT_REVIEW_ALLOW_OTHER_TABLES"
TABLE = "puaudit_review_decisions"

#: Columns of :meth:`ReviewStore.decisions` and of an export, in order. ``reviewer`` is who
#: decided (the login's identity when the dashboard has one), ``reviewer_name`` the name shown.
DECISION_COLUMNS = ["uid", "row_key", "verdict", "reviewer", "note", "created_at", "dataset",
                    "judge_verdict", "p_judge_right", "audit_group", "settings", "reviewer_name"]
#: Columns added after the table's first release: added to an older table when it is opened.
_ADDED_COLUMNS = {"reviewer_name": f"VARCHAR({MAX_REVIEWER})"}


class Base(DeclarativeBase):
    pass


class Decision(Base):
    """One reviewer's verdict on one row (never updated; later decisions supersede)."""

    __tablename__ = TABLE

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
    #: the reviewer's display name when ``reviewer`` is a login identity (email or subject)
    reviewer_name: Mapped[str | None] = mapped_column(String(MAX_REVIEWER), nullable=True)


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


class ReviewStore:
    """Review decisions in a database (see the module docstring for the location).

    Parameters
    ----------
    url : str, optional
        A SQLAlchemy URL; default :func:`default_url`.
    create : bool, default True
        Create the folder, the file and the table when missing.
    allow_other_tables : bool, optional
        Use an SQLite file that also holds tables of another application (the store adds its
        table and leaves the journal mode alone). Default: ``$PUAUDIT_REVIEW_ALLOW_OTHER_TABLES``
        is 1; otherwise such a file is refused untouched.

    Attributes
    ----------
    read_only : bool
        The database could not be opened for writing (file, folder or mount read-only): its
        decisions are read, saving raises a :class:`PUAuditError` of kind ``"read-only"``.
    read_only_reason : str
        Why, for the page to show.
    """

    def __init__(self, url: str | None = None, *, create: bool = True,
                 allow_other_tables: bool | None = None):
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
        self.read_only = False
        self.read_only_reason = ""
        if allow_other_tables is None:
            allow_other_tables = os.environ.get(OTHER_TABLES_ENV, "").strip().lower() in (
                "1", "true", "yes")
        self.allow_other_tables = bool(allow_other_tables)
        file = self._file()
        other = _other_tables(file) if file is not None else []
        if other and not self.allow_other_tables:
            err = PUAuditError(
                f"The review database {self.location} holds tables of another application "
                f"({', '.join(other[:5])}{', ...' if len(other) > 5 else ''}); PUAudit would add "
                "its own table to the file and change its journal mode. It was left untouched. "
                f"Set {DB_ENV} to a file of its own, or, to share this file on purpose, pass "
                f"--allow-other-tables (the dashboard: {OTHER_TABLES_ENV}=1).")
            err.kind = "other-tables"
            raise err
        if file is not None and create:
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
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
            _sqlite_setup(self.engine, wal=not other)
        try:
            self._open(create)
        except PUAuditError as err:
            kind = getattr(err, "kind", "")
            if not (kind in ("read-only", "unavailable") and self._readable_copy(err)):
                raise

    def _file(self) -> Path | None:
        """The SQLite file of a plain path (not ``:memory:``, not a ``file:`` URI)."""
        if not self.is_sqlite or not self.path or self.path == ":memory:" \
                or self.path.startswith("file:"):
            return None
        return Path(self.path)

    def _open(self, create: bool) -> None:
        """Create the table (or check it is there) in one write transaction: processes
        creating a new file at once queue on the lock instead of failing; a file that cannot be
        written fails here, not at the first decision."""
        with self._guard("open"):
            with self.engine.connect() as conn:
                conn = conn.execution_options(puaudit_write=True)
                with conn.begin():
                    if create:
                        Base.metadata.create_all(conn)
                    conn.execute(select(func.count()).select_from(Decision.__table__))
                    have = {c["name"] for c in inspect(conn).get_columns(TABLE)}
                    for col, sql_type in _ADDED_COLUMNS.items():
                        if col not in have:  # a table made by an earlier version
                            conn.execute(text(f"ALTER TABLE {TABLE} ADD COLUMN {col} {sql_type}"))
                    if self.is_sqlite:  # rewrite one header field as it is: a write, which
                        # a read-only file, folder, mount or connection refuses here
                        version = int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0)
                        conn.exec_driver_sql(f"PRAGMA user_version = {version}")
        self._columns = set(DECISION_COLUMNS)

    def _readable_copy(self, err: PUAuditError) -> bool:
        """Open the SQLite file read-only after ``err`` (the file, its folder or its mount
        cannot be written); True when its decisions can be read that way."""
        file = self._file()
        if self.is_sqlite and file is None and (self.path or "").startswith("file:"):
            engines = [self.engine]  # a URI the caller made read-only (mode=ro)
        elif file is not None and file.is_file():
            # immutable=1 as a last resort: a WAL file in a read-only folder cannot be read
            # otherwise (SQLite needs to create its -shm file next to it)
            engines = [create_engine("sqlite://", creator=_ro_connect(file, extra))
                       for extra in ("", "&immutable=1")]
        else:
            return False
        for engine in engines:
            try:
                with engine.connect() as conn:
                    conn.execute(select(func.count()).select_from(Decision.__table__))
                    self._columns = {c["name"] for c in inspect(conn).get_columns(TABLE)}
            except SQLAlchemyError:
                engine.dispose()
                continue
            if engine is not self.engine:
                self.engine.dispose()
                self.engine = engine
            self.read_only = True
            self.read_only_reason = str(err)
            return True
        return False

    # -- errors ------------------------------------------------------------------------------
    def _guard(self, action: str):
        return _Guard(self, action)

    def explain(self, exc: BaseException, action: str) -> PUAuditError:
        """A :class:`PUAuditError` for a database error, saying what is wrong and what to do."""
        text = str(getattr(exc, "orig", None) or exc)
        low = text.lower()
        where = f"The review database {self.location}"
        for kind, needles, msg in (
                ("locked", ("locked", "busy"),
                 f"is locked: another program has held it for more than {BUSY_TIMEOUT_S:.0f} s "
                 "(an open sqlite3 shell, a backup, a stuck process?). Decisions already saved "
                 "are safe; the one you just made was not saved. Close the other program and try "
                 "again."),
                ("read-only", ("readonly", "read-only", "read only"),
                 "is read-only (file or folder permissions, or a read-only mount): decisions are "
                 "read and shown, saving is off. Make the file and its folder writable, or set "
                 f"{DB_ENV} to a writable path and import an export there."),
                ("corrupt", ("not a database", "malformed", "corrupt", "file is encrypted"),
                 "is not a valid SQLite database (damaged, or another kind of file). It was left "
                 "untouched. Move it aside or restore a backup (`sqlite3 FILE \".recover\"` may "
                 f"save its decisions), or set {DB_ENV} to a new file."),
                ("unavailable", ("unable to open",),
                 f"cannot be opened (missing folder or no permission). Set {DB_ENV} to a path "
                 "this server can write.")):
            if any(n in low for n in needles):
                break
        else:
            kind, msg = "error", f"failed while trying to {action}: {text[:300]}"
        err = PUAuditError(f"{where} {msg}")
        err.kind = kind
        return err

    # -- writing -----------------------------------------------------------------------------
    def add(self, row_key: str, verdict: str, reviewer: str, *, note: str = "",
            settings: dict | None = None, dataset: str = "", judge_verdict: str | None = None,
            p_judge_right: float | None = None, audit_group: str | None = None,
            created_at=None, uid: str | None = None, reviewer_name: str | None = None) -> dict:
        """Save one decision; returns it as a dict (with its ``uid`` and ``created_at``).

        ``reviewer`` is who decided (a typed name, or the login's identity), ``reviewer_name``
        the name to show for it when that differs."""
        rec = {"uid": uid, "row_key": row_key, "verdict": verdict, "reviewer": reviewer,
               "reviewer_name": reviewer_name, "note": note, "settings": settings,
               "dataset": dataset, "judge_verdict": judge_verdict,
               "p_judge_right": p_judge_right, "audit_group": audit_group,
               "created_at": created_at}
        (saved,) = clean_decisions([rec])
        self._write([saved])
        return saved

    def add_many(self, records, *, log: bool = False):
        """Save many decisions in one transaction; returns how many were added.

        A decision whose ``uid`` is already stored is left out (importing one export twice adds
        nothing), and so is a repeat of a decision earlier in ``records``. A ``uid`` that comes
        back with another row, verdict, reviewer or note (in ``records`` or against the store)
        is refused, naming it: one uid is one decision. Nothing is saved unless every decision
        is valid (:func:`~puaudit.review.validate.clean_decisions`).

        With ``log=True`` returns ``(added, log)``, ``log`` holding ``n_added``, ``n_stored``
        (already in the database) and ``n_repeated`` (repeats within ``records``).
        """
        rows = clean_decisions(list(records))
        first: dict[str, int] = {}
        for i, r in enumerate(rows):
            j = first.setdefault(r["uid"], i)
            if j != i:
                _same_decision(rows[j], r, f"decisions {j + 1} and {i + 1} of the input",
                               row=i + 1)
        counts = self._write(rows)
        return (counts["n_added"], counts) if log else counts["n_added"]

    def _refuse_write(self) -> None:
        if self.read_only:
            err = PUAuditError(f"{self.read_only_reason} Nothing was saved.")
            err.kind = "read-only"
            raise err

    def _write(self, rows: list[dict]) -> dict:
        counts = {"n_added": 0, "n_stored": 0, "n_repeated": 0}
        if not rows:
            return counts
        self._refuse_write()
        with self._guard("save decisions"):
            with self.engine.connect() as conn:
                conn = conn.execution_options(puaudit_write=True)
                with conn.begin():
                    uids = list(dict.fromkeys(r["uid"] for r in rows))
                    stored: dict = {}
                    for i in range(0, len(uids), 500):
                        for rec in conn.execute(select(*[getattr(Decision, c) for c in
                                                         _IDENTITY]).where(
                                Decision.uid.in_(uids[i:i + 500]))).mappings():
                            stored[rec["uid"]] = dict(rec)
                    new, seen = [], set()
                    for i, r in enumerate(rows):
                        if r["uid"] in stored:
                            _same_decision(stored[r["uid"]], r, f"decision {i + 1} and the one "
                                           f"stored in {self.location}", row=i + 1)
                            counts["n_stored"] += 1
                        elif r["uid"] in seen:
                            counts["n_repeated"] += 1
                        else:
                            seen.add(r["uid"])
                            new.append(r)
                    if new:
                        conn.execute(insert(Decision), new)
        counts["n_added"] = len(new)
        return counts

    # -- reading -----------------------------------------------------------------------------
    def decisions(self, keys=None, *, reviewer: str | None = None) -> pd.DataFrame:
        """Decisions (all, or those on ``keys`` / by ``reviewer``) oldest first, as a frame with
        :data:`DECISION_COLUMNS`; ``created_at`` in UTC."""
        have = getattr(self, "_columns", set(DECISION_COLUMNS))
        # a read-only table made by an earlier version lacks the newer columns: read as empty
        q = select(*[getattr(Decision, c) if c in have else literal(None).label(c)
                     for c in DECISION_COLUMNS]).order_by(Decision.created_at, Decision.id)
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
        df["created_at"] = pd.to_datetime(df["created_at"], utc=True)
        return df.sort_values("created_at", kind="stable").reset_index(drop=True) if len(df) else df

    def count(self) -> int:
        with self._guard("count decisions"):
            with self.engine.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(Decision)).scalar_one())

    def dispose(self) -> None:
        """Close every pooled connection (the file stays as it is)."""
        self.engine.dispose()


#: what makes two decisions with one uid the same decision
_IDENTITY = ("uid", "row_key", "verdict", "reviewer", "note")


def _same_decision(old: dict, new: dict, where: str, *, row: int) -> None:
    """Refuse two decisions with one uid that say different things."""
    for field in _IDENTITY[1:]:
        a, b = old.get(field) or "", new.get(field) or ""
        if a != b:
            raise PUAuditError(
                f"uid {new['uid']!r} names two different decisions ({where}): {field} "
                f"{str(a)[:40]!r} vs {str(b)[:40]!r}. One uid is one decision; a changed mind "
                "is a new decision with a new uid. Remove the repeated line, or give it a new "
                "uid.", column="uid", row=row)


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


def _ro_connect(file: Path, extra: str = ""):
    """A connection factory opening ``file`` read-only (``extra``: more URI parameters)."""
    uri = f"file:{quote(str(file.resolve()))}?mode=ro{extra}"

    def connect():
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    return connect


def _other_tables(file: Path) -> list[str]:
    """Tables and views in an existing SQLite file that are not the store's, read without
    changing anything; [] when there is no such file or it cannot be read as SQLite (opening
    it then says what is wrong)."""
    if not file.is_file() or file.stat().st_size == 0:
        return []
    for extra in ("", "&immutable=1"):
        try:
            con = _ro_connect(file, extra)()
            try:
                names = [r[0] for r in con.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
            finally:
                con.close()
        except sqlite3.Error:
            continue
        return sorted(n for n in names if n != TABLE and not n.startswith("sqlite_"))
    return []


def _sqlite_setup(engine, *, wal: bool = True) -> None:
    """WAL, a busy timeout, and BEGIN IMMEDIATE for writes (readers never block writers; two
    writers queue instead of failing with 'database is locked' on a stale snapshot). ``wal``
    False leaves the journal mode of a file shared with another application as it is."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if wal:
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
