"""What every handler of the console shares: the ``Console`` (cluster client, samples,
settings, templates) stored in the aiohttp application, and rendering a page with what every
template needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from kbroker.client import KafkaClient
from kbroker.console import formatting
from kbroker.console.auth import CsrfTokens
from kbroker.console.sampler import Sampler
from kbroker.console.samples import SampleStore
from kbroker.console.schemas import RegistryClient

PACKAGE_DIR = Path(__file__).resolve().parent
# The charting library, installed from the npm registry by `make console-assets` (Makefile).
DEFAULT_VENDOR_DIR = PACKAGE_DIR.parents[1] / "build" / "console-web" / "node_modules"


@dataclass
class Console:
    """What every handler needs: the cluster client, the samples, the settings."""

    client: KafkaClient
    bootstrap: str
    store: SampleStore
    sampler: Sampler
    allow_writes: bool = False
    users: dict[str, str] = field(default_factory=dict)
    registry: RegistryClient | None = None
    tokens: CsrfTokens = field(default_factory=CsrfTokens)
    vendor_dir: Path = DEFAULT_VENDOR_DIR
    templates: jinja2.Environment = field(init=False)

    def __post_init__(self) -> None:
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(PACKAGE_DIR / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["ts"] = formatting.format_timestamp
        self.templates.filters["size"] = formatting.format_size
        self.templates.filters["rate"] = formatting.format_rate

    @property
    def charts_available(self) -> bool:
        return (self.vendor_dir / "uplot" / "dist" / "uPlot.iife.min.js").is_file()


CONSOLE = web.AppKey("console", Console)


def console_of(request: web.Request) -> Console:
    return request.app[CONSOLE]


def render(request: web.Request, template: str, status: int = 200, **values: Any) -> web.Response:
    console = console_of(request)
    session = request.get("session", "")
    text = console.templates.get_template(template).render(
        csrf_token=console.tokens.token(session) if session else "",
        allow_writes=console.allow_writes,
        bootstrap=console.bootstrap,
        charts_available=console.charts_available,
        sample_interval=console.sampler.interval,
        snapshot=console.sampler.snapshot,
        path=request.path,
        **values,
    )
    return web.Response(text=text, status=status, content_type="text/html")
