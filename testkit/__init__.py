"""Helpers shared by the tests and the benchmarks (one importable place, installed with the
package in the project's venv): a small CoAP client (``coap``), a wot-device runner (``device``),
gateway-emulator traces, runs and a scripted responder (``ge``), the machine-wide host lock for
timing measurements (``hostlock``), the benches' common pieces (``bench``) and the Observe
bench's sustained-rate rule (``notify_stats``). Not part of WoTbench itself."""
