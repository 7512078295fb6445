"""A stdlib OTLP/HTTP collector for the telemetry tests: what a process exports, decoded."""

from __future__ import annotations

from typing import Any


class Collector:
    """A stdlib OTLP/HTTP receiver: decodes every ExportTraceServiceRequest and
    ExportMetricsServiceRequest it is sent."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from helpers import serving

        self.spans: list[Any] = []
        self.metric_names: set[str] = set()
        self.resources: list[dict[str, Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    import gzip

                    body = gzip.decompress(body)
                collector.receive(self.path, body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._serving = serving(self.server)
        self._serving.__enter__()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def receive(self, path: str, body: bytes) -> None:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        if path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                self.resources.append(
                    {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                )
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(scope_spans.spans)
        elif path == "/v1/metrics":
            metrics_request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
            for resource_metrics in metrics_request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    self.metric_names.update(m.name for m in scope_metrics.metrics)

    def close(self) -> None:
        self._serving.__exit__(None, None, None)
