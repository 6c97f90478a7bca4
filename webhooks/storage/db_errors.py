"""Why the database named by ``DATABASE_URL`` could not be used, in one line saying what to do.

A process that cannot reach its database at start says so in one line (``explain``),
not in a driver's traceback: which database, where, what went wrong and how to fix it,
the password masked.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

from webhooks.secrecy import mask

#: PostgreSQL's (libpq's) wording of the failures people meet when setting up, and what to do about each.
_POSTGRES_PROBLEMS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r'database "(?P<name>[^"]+)" does not exist'),
     'database "{name}" does not exist on PostgreSQL at {where}: create it (createdb -h {host} -p {port} -U {user} {name}), '
     "or fix DATABASE_URL"),
    (re.compile(r'password authentication failed for user "(?P<name>[^"]+)"'),
     'the password of user "{name}" was refused by PostgreSQL at {where}: fix DATABASE_URL'),
    (re.compile(r'role "(?P<name>[^"]+)" does not exist'),
     'user "{name}" does not exist on PostgreSQL at {where}: create it (createuser -h {host} -p {port} {name}), or fix DATABASE_URL'),
    (re.compile(r"connection refused", re.IGNORECASE),
     "nothing answers at {where} (DATABASE_URL; connection refused): start PostgreSQL there, or fix DATABASE_URL"),
    (re.compile(r"could not translate host name|name or service not known", re.IGNORECASE),
     "the host name {host} was not found: fix DATABASE_URL"),
    (re.compile(r"timeout expired", re.IGNORECASE),
     "PostgreSQL at {where} did not answer in time: check that it is reachable and running"),
)


def explain(error: BaseException, database_url: str) -> str:
    """``error`` (met using ``database_url``) as one line for people: what is wrong, and what to do."""
    url = urlparse(database_url)
    text = str(error).strip()
    if url.scheme == "sqlite":
        path = database_url.split("sqlite:///", 1)[-1] or ":memory:"
        if "unable to open database file" in text:
            return (f"cannot open the SQLite database {path} (DATABASE_URL): does its folder exist, and may this "
                    "user write there?")
        return mask(f"SQLite database {path} (DATABASE_URL): {text}")
    host, port, user = url.hostname or "localhost", url.port or 5432, url.username or "postgres"
    where = f"{host}:{port}"
    for pattern, advice in _POSTGRES_PROBLEMS:
        match = pattern.search(text)
        if match:
            return advice.format(where=where, host=host, port=port, user=user, **match.groupdict())
    first_line = text.splitlines()[0] if text else type(error).__name__
    return mask(f"database {database_url} (DATABASE_URL): {first_line}")
