package io.litemq.spark;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The table: batch and streaming reads in the JVM where it can, the Python source's table otherwise. */
final class LiteMQTable implements SupportsRead, SupportsWrite {
  private final StructType schema;
  private final PythonDataSourceV2 pySource;
  private final Table py;

  LiteMQTable(StructType schema, PythonDataSourceV2 pySource, Table py) {
    this.schema = schema;
    this.pySource = pySource;
    this.py = py;
  }

  @Override
  public String name() {
    return LiteMQProvider.NAME;
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    Set<TableCapability> c = new HashSet<>(py.capabilities());
    c.add(TableCapability.BATCH_READ);
    return c;
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    String why = LiteMQScanBuilder.notForJvm(options);
    if (why != null) return ((SupportsRead) py).newScanBuilder(options);
    List<Planner.Ref> refs;
    try {
      refs = Planner.discover(LiteMQScanBuilder.paths(options));
    } catch (Planner.NotForJvm e) {
      throw new IllegalStateException(e);
    }
    TypedLoad typed = TypedLoad.of(refs);
    if (!LiteMQScanBuilder.readable(schema, typed)) return ((SupportsRead) py).newScanBuilder(options);
    return new LiteMQScanBuilder(schema, options, (SupportsRead) py, refs, typed);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) py).newWriteBuilder(info);
  }
}
