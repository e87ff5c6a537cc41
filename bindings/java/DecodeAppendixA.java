// Decodes an OCF index file with the Java classes protoc generates from
// proto/ and prints the summary of bindings/appendix_a.expected. A binding
// example, not a reader: it runs none of the checks of spec/format.md.
//
//   java -cp CLASSES:/usr/share/java/protobuf.jar DecodeAppendixA spec/examples/minimal.ocf

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.openckpt.ocf.v1.BlockTable;
import org.openckpt.ocf.v1.Index;
import org.openckpt.ocf.v1.Shard;
import org.openckpt.ocf.v1.TensorTable;
import org.openckpt.ocf.v1.Value;

public final class DecodeAppendixA {
  private DecodeAppendixA() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 1) {
      System.err.println("usage: DecodeAppendixA FILE.ocf");
      System.exit(2);
    }
    ByteBuffer file = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[0]))).order(ByteOrder.LITTLE_ENDIAN);
    int footer = file.capacity() - 32;
    long indexOffset = file.getLong(footer);
    long indexLength = file.getLong(footer + 8);
    Index index = Index.parseFrom(ByteBuffer.wrap(file.array(), (int) indexOffset, (int) indexLength));
    System.out.printf(Locale.ROOT, "footer index_offset=%d index_length=%d index_crc32c=0x%08x format=%d.%d%n",
        indexOffset, indexLength, file.getInt(footer + 16), file.getShort(footer + 20), file.getShort(footer + 22));
    System.out.printf("header required_features=%d writer=\"%s\"%n",
        index.getHeader().getRequiredFeaturesCount(), index.getHeader().getWriter());
    System.out.printf("shards count=%d%n", index.getShardsCount());
    for (int s = 0; s < index.getShardsCount(); s++) {
      Shard shard = index.getShards(s);
      System.out.printf("shard %d path=\"%s\" length=%d%n", s, shard.getPath(), shard.getLength());
    }
    printTables(index, file);
    for (Map.Entry<String, Value> entry : index.getMetadataMap().entrySet()) {
      Value value = entry.getValue();
      if (value.getKindCase() == Value.KindCase.INT_VALUE) {
        System.out.printf("metadata %s int_value=%d%n", entry.getKey(), value.getIntValue());
      } else {
        System.out.printf("metadata %s kind=%s%n", entry.getKey(), value.getKindCase());
      }
    }
    System.out.printf("object_graph %s%n", index.hasObjectGraph() ? "present" : "absent");
  }

  private static void printTables(Index index, ByteBuffer file) {
    TensorTable tensors = index.getTensors();
    System.out.printf("tensors count=%d%n", tensors.getKeysCount());
    for (int i = 0, dim = 0; i < tensors.getKeysCount(); i++) {
      List<String> shape = new ArrayList<>();
      for (int d = 0; d < tensors.getRanks(i); d++, dim++) {
        shape.add(Long.toUnsignedString(tensors.getDims(dim)));
      }
      System.out.printf("tensor %d key=\"%s\" dtype=%s shape=[%s] slice_count=%d%n", i, tensors.getKeys(i),
          tensors.getDtypes(i).name(), String.join(", ", shape), tensors.getSliceCounts(i));
    }
    BlockTable blocks = index.getBlocks();
    System.out.printf("blocks count=%d%n", blocks.getOffsetsCount());
    for (int j = 0; j < blocks.getOffsetsCount(); j++) {
      System.out.printf("block %d shard=%d offset=%d stored_length=%d raw_length=%d codec=%s byte_shuffle=%b chunk_size=%d%n",
          j, blocks.getShards(j), blocks.getOffsets(j), blocks.getStoredLengths(j), blocks.getRawLengths(j),
          blocks.getCodecs(j).name(), blocks.getByteShuffles(j), blocks.getChunkSizes(j));
    }
    List<String> crcs = new ArrayList<>();
    for (int crc : blocks.getChunkCrcsList()) {
      crcs.add(String.format("0x%08x", crc));
    }
    System.out.printf("chunk_crcs [%s]%n", String.join(", ", crcs));
    // The first tensor's values, read as little-endian float32 from its first
    // block (the example's tensor is float32, stored whole with CODEC_NONE).
    List<String> values = new ArrayList<>();
    for (long at = 0; at < blocks.getRawLengths(0); at += 4) {
      values.add(String.format(Locale.ROOT, "%.1f", file.getFloat((int) (blocks.getOffsets(0) + at))));
    }
    System.out.printf("data %s=[%s]%n", tensors.getKeys(0), String.join(", ", values));
  }
}
