package io.deltaflow.state;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An incremental view's exact distinct count with a lateness: lets through the first row of each (group,
 * value), and keeps each group's values until the watermark passes the end of the group's window.
 *
 * <p>Spark's {@code dropDuplicates} finds the values to drop by reading its whole state at every batch, so a
 * batch costs what the state holds. Here the values live in a map per group (a key of the view) and the
 * group has an event-time timer at its window's end: Spark finds the timers due by a range scan, and a
 * group's values are dropped with it, so a batch costs what it brings and what it drops.
 *
 * <p>A row of a window already closed is not let through: its window's values are gone from the state, and
 * the view recomputes that window from its input (deltaflow's {@code sinks/late_rows.py}).
 */
public final class FirstSeen extends StatefulProcessor<Row, Row, Row> {
  private final StructType valueSchema;
  private final int window;  // the window's position in the group's columns
  private transient MapState<Row, Boolean> seen;

  private FirstSeen(StructType valueSchema, int window) {
    this.valueSchema = valueSchema;
    this.window = window;
  }

  /**
   * The first-seen rows of {@code pairs}: its columns the group's (the window among them), then the value.
   *
   * @param pairs a stream with a watermark; its last column is the value counted
   * @param windowColumn the group column holding the window (a struct of start and end)
   * @return the rows of {@code pairs} whose (group, value) no earlier row had, in append mode
   */
  public static Dataset<Row> apply(Dataset<Row> pairs, String windowColumn) {
    StructType schema = pairs.schema();
    StructField[] fields = schema.fields();
    int groups = fields.length - 1;
    StructType keySchema = new StructType(Arrays.copyOf(fields, groups));
    StructType valueSchema = new StructType(new StructField[] {fields[groups]});
    // grouped by its columns, not by a function of each row: Spark passes the group's columns as they are
    // instead of turning every row into a Row for the function and its result back into columns
    Column[] keys = Arrays.stream(keySchema.fieldNames()).map(pairs::col).toArray(Column[]::new);
    return pairs.groupBy(keys).as(Encoders.row(keySchema), Encoders.row(schema))
        .transformWithState(new FirstSeen(valueSchema, keySchema.fieldIndex(windowColumn)),
                            TimeMode.EventTime(), OutputMode.Append(), Encoders.row(schema));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    seen = getHandle().getMapState("seen", Encoders.row(valueSchema), Encoders.BOOLEAN(), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timers) {
    long end = millis(key.getStruct(window).get(1));
    List<Row> first = new ArrayList<>();
    if (end > timers.getCurrentWatermarkInMs()) {  // else: closed, recomputed from the input
      while (rows.hasNext()) {
        Row row = rows.next();
        Row value = RowFactory.create(row.get(row.length() - 1));
        if (!seen.containsKey(value)) {
          seen.updateValue(value, Boolean.TRUE);
          first.add(row);
        }
      }
      if (!first.isEmpty()) {
        getHandle().registerTimer(end);
      }
    }
    return CollectionConverters.asScala(first.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(Row key, TimerValues timers, ExpiredTimerInfo expired) {
    seen.clear();
    return CollectionConverters.asScala(new ArrayList<Row>().iterator());
  }

  private static long millis(Object moment) {
    return moment instanceof Timestamp stamp ? stamp.getTime() : ((Instant) moment).toEpochMilli();
  }
}
