package io.litemq.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("litemq")} in the JVM. A JVM source takes the short name ahead of the Python
 * source of the same name, so this provider keeps the Python source for everything it does not
 * read itself: the schema and option checks (so both readers give the same schema and the same
 * errors), writes, and reads of archives, encrypted queues without a key and the key, where
 * and topic options (and, for streams, the batch-only options it refuses). Batch and streaming
 * reads of local queues and datasets run here ({@link LiteMQStream} for streams).
 */
public final class LiteMQProvider implements TableProvider, DataSourceRegister {
  static final String NAME = "litemq";

  static PythonDataSourceV2 python() {
    PythonDataSourceV2 py = new PythonDataSourceV2();
    py.setShortName(NAME);
    return py;
  }

  private PythonDataSourceV2 py;

  private synchronized PythonDataSourceV2 py() {
    if (py == null) py = python();
    return py;
  }

  @Override
  public String shortName() {
    return NAME;
  }

  /**
   * The Python source's schema (it checks the options and paths, with its errors), except for
   * a load of typed queues this reader serves: {@code seq}, {@code timestamp}, then the
   * schema's fields ({@link TypedLoad#sparkSchema}).
   */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    StructType py = py().inferSchema(options);
    if (LiteMQScanBuilder.notForJvm(options) != null) return py;
    try {
      TypedLoad typed = TypedLoad.of(Planner.discover(LiteMQScanBuilder.paths(options)));
      return typed == null ? py : typed.sparkSchema();
    } catch (Planner.NotForJvm e) {
      return py;
    }
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new LiteMQTable(schema, py(), py().getTable(schema, partitioning, properties));
  }
}
