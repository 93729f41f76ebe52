"""Swagger UI and Redoc come from the project itself (issue 17 point 2): the
pages reference only this server, and every file they load is served with
DEBUG off (WhiteNoise), so the docs work without internet. The headless
browser check is ``tests/browser/test_api_docs.py``."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import pytest

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_docs_pages__load_every_asset_from_this_server_with_debug_off(server, page):
    with server.client() as http:
        response = http.get(page)
        assert response.status_code == 200, response.text[:300]
        html = response.text
        assets = [urljoin(f"{server.url}{page}", a) for a in ASSET.findall(html)]
        scripts = [a for a in assets if a.endswith(".js") or "script" in a]
        assert scripts, html[:1000]
        for asset in assets:
            parts = urlsplit(asset)
            assert parts.netloc == urlsplit(server.url).netloc, f"{page} loads {asset}"
            loaded = http.get(asset)
            assert loaded.status_code == 200, f"{asset}: {loaded.status_code}"
            assert loaded.content, asset
    assert "cdn" not in html.lower() and "@latest" not in html
