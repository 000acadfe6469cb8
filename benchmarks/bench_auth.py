"""What the API-key check costs per request: auth on vs off, measured in the same run.

Two figures, interleaved so machine noise hits both sides alike:
* ``rl.keys.authenticate`` alone (the per-request key check: header value -> Principal),
  warm (the usual case: the key was seen in the last 5 s) and cold (a catalog read);
* a real search over HTTP (uvicorn on loopback, sequential requests), auth on vs off.

    .venv/bin/python benchmarks/bench_auth.py [--requests 400]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from ragline.api.app import create_app
from ragline.facade import DocumentInput, Ragline
from ragline.services import auth as auth_module
from ragline.settings import Settings
from ragline.testing.server import serve_in_thread


def us(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e6:.1f} µs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        apps = {}
        keys = {}
        for mode in ("on", "off"):
            s = Settings(data_dir=Path(tmp) / mode, auth=mode, _env_file=None)  # type: ignore[call-arg]
            rl = Ragline(s).start()
            me = rl.owner()
            rl.collections.create(me, "c")
            rl.documents.add(me, "c", [DocumentInput(f"text {i}", {"i": i}, [1.0, i / 100, 0.5],
                                                     f"d{i}") for i in range(200)])
            keys[mode] = rl.keys.create(me, "user", "default")[1]
            apps[mode] = (rl, create_app(ragline=rl))
        rl_on = apps["on"][0]
        warm, cold = [], []
        for _ in range(2000):
            t = time.perf_counter()
            rl_on.keys.authenticate(keys["on"])
            warm.append(time.perf_counter() - t)
        for _ in range(300):
            rl_on.services.auth._cache.clear()
            t = time.perf_counter()
            rl_on.keys.authenticate(keys["on"])
            cold.append(time.perf_counter() - t)
        print(f"key check alone: warm {us(warm)}, cold (catalog read) {us(cold)} "
              f"(cache TTL {auth_module.CACHE_TTL_S} s)")
        with serve_in_thread(apps["on"][1]) as url_on, serve_in_thread(apps["off"][1]) as url_off:
            lat: dict[str, list[float]] = {"on": [], "off": []}
            body = {"embedding": [1.0, 0.3, 0.5], "limit": 5}
            with httpx.Client() as c:
                for i in range(args.requests):
                    for mode, url in (("on", url_on), ("off", url_off))[:: 1 if i % 2 else -1]:
                        h = {"Authorization": f"Bearer {keys['on']}"} if mode == "on" else {}
                        t = time.perf_counter()
                        r = c.post(f"{url}/collections/c/search", json=body, headers=h)
                        lat[mode].append(time.perf_counter() - t)
                        assert r.status_code == 200, r.text
        on, off = statistics.median(lat["on"]), statistics.median(lat["off"])
        print(f"HTTP search p50: auth on {on * 1e3:.3f} ms, off {off * 1e3:.3f} ms, "
              f"difference {(on - off) * 1e3:+.3f} ms, ratio {on / off:.3f}")
        for rl, _ in apps.values():
            rl.close()


if __name__ == "__main__":
    main()
