// Which OTLP encoding spans are sent in, as the OpenTelemetry specification reads the standard
// variables: OTLP/HTTP with protobuf bodies (the default) or JSON ones. gRPC is not spoken.

/** The OTLP protocols spans can be sent in. */
export const EXPORT_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type ExportProtocol = (typeof EXPORT_PROTOCOLS)[number];

/**
 * OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else `http/protobuf`;
 * throws for `grpc` or anything else, naming the variable (loadConfig makes it a configuration error).
 */
export function exportProtocol(env: Record<string, string | undefined>): ExportProtocol {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const value = env[name]?.trim();
    if (!value) continue;
    if ((EXPORT_PROTOCOLS as readonly string[]).includes(value)) return value as ExportProtocol;
    throw new Error(
      `${name}=${value} is not supported: spans are sent over OTLP/HTTP, as http/protobuf (the default) or http/json`,
    );
  }
  return 'http/protobuf';
}
