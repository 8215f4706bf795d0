// A reader of OTLP/HTTP protobuf trace exports (opentelemetry-proto, collector/trace/v1), written
// from the .proto field numbers: it turns an ExportTraceServiceRequest into the shape of its JSON
// mapping (hex ids, nanoseconds as decimal strings, typed attribute values), so that tests read
// both protocols' exports the same way.

type Fields = Map<number, (bigint | Buffer)[]>;

/** A message's fields by number: varints and fixed numbers as bigints, length-delimited ones as bytes. */
function fields(data: Buffer): Fields {
  const found: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = data[at++];
      if (byte === undefined) throw new Error('a varint runs past the end of the message');
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < data.length) {
    const tag = Number(varint());
    const [field, wire] = [tag >>> 3, tag & 7];
    let value: bigint | Buffer;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = data.readBigUInt64LE(at);
      at += 8;
    } else if (wire === 5) {
      value = BigInt(data.readUInt32LE(at));
      at += 4;
    } else if (wire === 2) {
      const length = Number(varint());
      value = data.subarray(at, at + length);
      if (value.length !== length) throw new Error(`field ${field} runs past the end of the message`);
      at += length;
    } else throw new Error(`unknown wire type ${wire} (field ${field})`);
    found.set(field, [...(found.get(field) ?? []), value]);
  }
  return found;
}

const one = (f: Fields, n: number) => f.get(n)?.[0];
const bytesOf = (f: Fields, n: number) => (one(f, n) as Buffer | undefined) ?? Buffer.alloc(0);
const textOf = (f: Fields, n: number) => bytesOf(f, n).toString('utf8');
const numberOf = (f: Fields, n: number) => Number((one(f, n) as bigint | undefined) ?? 0n);
const all = (f: Fields, n: number) => (f.get(n) ?? []) as Buffer[];

export type OtlpValue = Record<string, unknown>;

function anyValue(data: Buffer): OtlpValue {
  const f = fields(data);
  if (f.has(1)) return { stringValue: textOf(f, 1) };
  if (f.has(2)) return { boolValue: numberOf(f, 2) === 1 };
  if (f.has(3)) return { intValue: Number(BigInt.asIntN(64, one(f, 3) as bigint)) };
  if (f.has(4)) return { doubleValue: Buffer.from(bytesOfFixed(one(f, 4) as bigint)).readDoubleLE(0) };
  if (f.has(5)) return { arrayValue: { values: all(fields(bytesOf(f, 5)), 1).map(anyValue) } };
  if (f.has(6)) return { kvlistValue: { values: all(fields(bytesOf(f, 6)), 1).map(keyValue) } };
  return {};
}

const bytesOfFixed = (value: bigint) => {
  const buffer = Buffer.alloc(8);
  buffer.writeBigUInt64LE(value);
  return buffer;
};

function keyValue(data: Buffer) {
  const f = fields(data);
  return { key: textOf(f, 1), value: anyValue(bytesOf(f, 2)) };
}

function span(data: Buffer) {
  const f = fields(data);
  const parent = bytesOf(f, 4);
  const events = all(f, 11).map((e) => {
    const ef = fields(e);
    return {
      attributes: all(ef, 3).map(keyValue),
      name: textOf(ef, 2),
      timeUnixNano: String(one(ef, 1) ?? 0n),
    };
  });
  const status = fields(bytesOf(f, 15));
  return {
    traceId: bytesOf(f, 1).toString('hex'),
    spanId: bytesOf(f, 2).toString('hex'),
    ...(parent.length > 0 ? { parentSpanId: parent.toString('hex') } : {}),
    name: textOf(f, 5),
    kind: numberOf(f, 6),
    startTimeUnixNano: String(one(f, 7) ?? 0n),
    endTimeUnixNano: String(one(f, 8) ?? 0n),
    attributes: all(f, 9).map(keyValue),
    ...(events.length > 0 ? { events } : {}),
    status: { code: numberOf(status, 3), ...(status.has(2) ? { message: textOf(status, 2) } : {}) },
    flags: numberOf(f, 16),
  };
}

/** An ExportTraceServiceRequest's bytes as its OTLP JSON. */
export function decodeTraceExport(body: Buffer) {
  return {
    resourceSpans: all(fields(body), 1).map((r) => {
      const rf = fields(r);
      const resource = fields(bytesOf(rf, 1));
      return {
        resource: { attributes: all(resource, 1).map(keyValue), droppedAttributesCount: numberOf(resource, 2) },
        ...(rf.has(3) ? { schemaUrl: textOf(rf, 3) } : {}),
        scopeSpans: all(rf, 2).map((s) => {
          const sf = fields(s);
          return { scope: { name: textOf(fields(bytesOf(sf, 1)), 1) }, spans: all(sf, 2).map(span) };
        }),
      };
    }),
  };
}
