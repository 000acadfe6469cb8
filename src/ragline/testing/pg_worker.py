"""A queue worker process for the queue tests: ``python -m ragline.testing.pg_worker DSN
SCHEMA LEASE_S SLEEP_SCALE``. Its one job kind, ``record``, sleeps ``payload["sleep"] *
SLEEP_SCALE`` seconds and then inserts (job number, pid) into ``<schema>.runs``, so a
test can count how many times each job really ran and where."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from ragline.catalog.pg_queue import JobQueue
from ragline.services.ingestion.queue_worker import run_worker


def main() -> None:
    dsn, schema, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
    scale = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    pool = ConnectionPool(dsn, min_size=1, max_size=4, open=True)
    queue = JobQueue(pool, schema, lease_s=lease)

    def record(payload: dict[str, Any]) -> dict[str, Any]:
        time.sleep(float(payload.get("sleep", 0)) * scale)
        with psycopg.connect(dsn) as conn:
            conn.execute(sql.SQL("INSERT INTO {} (job, pid) VALUES (%s, %s)").format(
                sql.Identifier(schema, "runs")), (payload["n"], os.getpid()))
        return {"pid": os.getpid()}

    print("ready", flush=True)
    done = run_worker(queue, {"record": record}, f"pid-{os.getpid()}", threading.Event(),
                      poll_s=0.05, exit_when_idle=True)
    print(f"done {done}", flush=True)
    pool.close()


if __name__ == "__main__":
    main()
