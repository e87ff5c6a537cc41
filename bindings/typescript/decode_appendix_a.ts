// Decodes an OCF index file with the TypeScript code protoc-gen-es
// generates from proto/ and prints the summary of
// bindings/appendix_a.expected. A binding example, not a reader: it runs
// none of the checks of spec/format.md.
//
//   node decode_appendix_a.js spec/examples/minimal.ocf
import { fromBinary } from "@bufbuild/protobuf";
import type { DescEnum } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import { IndexSchema } from "./gen/ocf/v1/index_pb";
import { CodecSchema, DtypeSchema } from "./gen/ocf/v1/tensor_pb";

// The enum value's name as proto/ spells it (DTYPE_FLOAT32), not the
// shortened TypeScript member name.
function protoName(schema: DescEnum, value: number): string {
  return schema.values.find((v) => v.number === value)?.name ?? String(value);
}

function hex32(value: number): string {
  return "0x" + (value >>> 0).toString(16).padStart(8, "0");
}

function main(path: string): void {
  const bytes = readFileSync(path);
  const file = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const footer = bytes.byteLength - 32;
  const indexOffset = file.getBigUint64(footer, true);
  const indexLength = file.getBigUint64(footer + 8, true);
  const index = fromBinary(
    IndexSchema,
    bytes.subarray(Number(indexOffset), Number(indexOffset + indexLength)),
  );
  const out: string[] = [];
  out.push(
    `footer index_offset=${indexOffset} index_length=${indexLength} ` +
      `index_crc32c=${hex32(file.getUint32(footer + 16, true))} ` +
      `format=${file.getUint16(footer + 20, true)}.${file.getUint16(footer + 22, true)}`,
  );
  out.push(
    `header required_features=${index.header?.requiredFeatures.length ?? 0} writer="${index.header?.writer ?? ""}"`,
  );
  out.push(`shards count=${index.shards.length}`);
  index.shards.forEach((shard, s) => out.push(`shard ${s} path="${shard.path}" length=${shard.length}`));
  const tensors = index.tensors!;
  out.push(`tensors count=${tensors.keys.length}`);
  let dim = 0;
  tensors.keys.forEach((key, i) => {
    const shape = tensors.dims.slice(dim, dim + tensors.ranks[i]);
    dim += tensors.ranks[i];
    out.push(
      `tensor ${i} key="${key}" dtype=${protoName(DtypeSchema, tensors.dtypes[i])} ` +
        `shape=[${shape.join(", ")}] slice_count=${tensors.sliceCounts[i]}`,
    );
  });
  const blocks = index.blocks!;
  out.push(`blocks count=${blocks.offsets.length}`);
  blocks.offsets.forEach((offset, j) =>
    out.push(
      `block ${j} shard=${blocks.shards[j]} offset=${offset} stored_length=${blocks.storedLengths[j]} ` +
        `raw_length=${blocks.rawLengths[j]} codec=${protoName(CodecSchema, blocks.codecs[j])} ` +
        `byte_shuffle=${blocks.byteShuffles[j]} chunk_size=${blocks.chunkSizes[j]}`,
    ),
  );
  out.push(`chunk_crcs [${blocks.chunkCrcs.map(hex32).join(", ")}]`);
  // The first tensor's values, read as little-endian float32 from its first
  // block (the example's tensor is float32, stored whole with CODEC_NONE).
  const values: string[] = [];
  for (let at = 0n; at < blocks.rawLengths[0]; at += 4n) {
    values.push(file.getFloat32(Number(blocks.offsets[0] + at), true).toFixed(1));
  }
  out.push(`data ${tensors.keys[0]}=[${values.join(", ")}]`);
  for (const [key, value] of Object.entries(index.metadata)) {
    out.push(
      value.kind.case === "intValue"
        ? `metadata ${key} int_value=${value.kind.value}`
        : `metadata ${key} kind=${value.kind.case}`,
    );
  }
  out.push(`object_graph ${index.objectGraph === undefined ? "absent" : "present"}`);
  console.log(out.join("\n"));
}

main(process.argv[2]);
