"""``gateways.http.setup`` and ``gateways.http.verify`` (issue 35): requests the harness sends to
every HTTP device before T0 (pre-create entities, subscribe) and after the test (check what
the test left), each a gateway-emulator run of its own on this host with its own figures
(``summary.json`` ``phases``), never mixed into the test's. A setup request that is not
answered 2xx stops the run before T0; a verify request that is not is named in the verdict's
notes. Paths and bodies are the GE's templates ({{seq}}, {{device}}, ...). Schema only: the checks are
``wotbench.config.http_spec.phase_problems``, the runs ``wotbench.runner.http_phases``."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


class HttpPhase(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    requests: int = Field(1, ge=1, le=10_000_000, description="requests per device")
    rate: float = Field(200.0, gt=0, le=1_000_000, description="requests per second per "
                        "device (open loop)")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = Field(
        "GET", description="the method of every request")
    path: str = Field("", description="the path (a template: {{seq}} {{device}} ...)")
    body_template: Optional[str] = Field(
        None, description="the body of POST/PUT/PATCH (a template); null: none")
    timeout_ms: int = Field(5000, gt=0, description="no answer by then: the request failed")
