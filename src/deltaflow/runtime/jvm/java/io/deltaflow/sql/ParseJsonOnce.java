package io.deltaflow.sql;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.JsonToStructs;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Parses a JSON column once where Spark's optimizer would parse it once per filtered field.
 *
 * <p>{@code select(from_json(value, schema).alias("e")).select("e.*").where("e.user_id IS NOT NULL")}
 * is optimized by pushing the filter below the projection that parses: the filter's {@code e.user_id}
 * becomes {@code from_json(value, <user_id only>).user_id}, so each row's JSON is parsed by the filter once
 * per field it names and once more by the projection (SPARK-47672; {@code
 * spark.sql.optimizer.avoidDoubleFilterEval} covers UDFs only). On the clickstream's silver (two fields
 * filtered) that is three parses of every event.
 *
 * <p>This rule runs after all of Spark's own ({@link #install}: the session's last optimizer batch, after
 * the last that pushes filters down) and moves the parse back below the filter: for a {@code Project} over
 * a {@code Filter} whose condition parses the same column, with the same options, as a {@code from_json}
 * the projection aliases, the parse is computed once beneath the conditions that read it, and both they and
 * the projection read its result; the conditions that read no parse stay beneath it, so a row they drop is
 * not parsed. The rows are the same: the filter's field of the whole parse is the field of the pruned one
 * (Spark's own {@code OptimizeJsonExprs} prunes on that equivalence).
 * {@code spark.deltaflow.optimizer.parseJsonOnce=false} turns it off.
 */
public final class ParseJsonOnce extends Rule<LogicalPlan> {
  /** The session setting that turns the rule off ("false"). */
  public static final String ENABLED = "spark.deltaflow.optimizer.parseJsonOnce";

  private final SparkSession session;

  private ParseJsonOnce(SparkSession session) {
    this.session = session;
  }

  /**
   * Adds the rule to {@code session}'s own optimizations ({@code spark.experimental.extraOptimizations}),
   * once; sessions cloned from it afterwards (a streaming query's) have it too.
   *
   * @param session the session
   */
  public static void install(SparkSession session) {
    List<Rule<LogicalPlan>> rules =
        new ArrayList<>(CollectionConverters.asJava(session.experimental().extraOptimizations()));
    for (Rule<LogicalPlan> rule : rules) {
      if (rule instanceof ParseJsonOnce) {
        return;
      }
    }
    rules.add(new ParseJsonOnce(session));
    session.experimental().extraOptimizations_$eq(CollectionConverters.asScala(rules).toSeq());
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    if (!"true".equalsIgnoreCase(session.conf().get(ENABLED, "true"))) {
      return plan;
    }
    return rewrite(plan);
  }

  private LogicalPlan rewrite(LogicalPlan plan) {
    LogicalPlan node = plan.mapChildren(this::rewrite);
    if (node instanceof Project project && project.child() instanceof Filter filter) {
      return parseOnce(project, filter);
    }
    return node;
  }

  private static LogicalPlan parseOnce(Project project, Filter filter) {
    List<NamedExpression> fields = CollectionConverters.asJava(project.projectList());
    List<Alias> parses = new ArrayList<>();
    for (NamedExpression field : fields) {
      if (field instanceof Alias alias && alias.child() instanceof JsonToStructs json
          && json.dataType() instanceof StructType && json.deterministic()) {
        parses.add(alias);
      }
    }
    if (parses.isEmpty()) {
      return project;
    }
    List<Expression> stay = new ArrayList<>();
    List<Expression> moved = new ArrayList<>();
    Set<Alias> used = new LinkedHashSet<>();
    for (Expression conjunct : conjuncts(filter.condition(), new ArrayList<>())) {
      Set<Alias> reads = new LinkedHashSet<>();
      Expression rewritten = substitute(conjunct, parses, reads);
      (reads.isEmpty() ? stay : moved).add(rewritten);
      used.addAll(reads);
    }
    if (used.isEmpty()) {
      return project;
    }
    // what reads no parse is filtered first, beneath the parse: a row it drops is not parsed at all
    LogicalPlan input = stay.isEmpty() ? filter.child() : new Filter(and(stay), filter.child());
    List<NamedExpression> below = new ArrayList<>(CollectionConverters.asJava(filter.child().output()));
    below.addAll(used);
    List<NamedExpression> above = new ArrayList<>();
    for (NamedExpression field : fields) {
      above.add(field instanceof Alias alias && used.contains(alias) ? alias.toAttribute() : field);
    }
    Project parsed = new Project(CollectionConverters.asScala(below).toSeq(), input);
    return new Project(CollectionConverters.asScala(above).toSeq(), new Filter(and(moved), parsed));
  }

  private static List<Expression> conjuncts(Expression condition, List<Expression> into) {
    if (condition instanceof And and) {
      conjuncts(and.left(), into);
      conjuncts(and.right(), into);
    } else {
      into.add(condition);
    }
    return into;
  }

  private static Expression and(List<Expression> conjuncts) {
    Expression all = conjuncts.get(0);
    for (Expression next : conjuncts.subList(1, conjuncts.size())) {
      all = new And(all, next);
    }
    return all;
  }

  /** {@code expression} with each parse one of {@code parses} makes read from that parse's column. */
  private static Expression substitute(Expression expression, List<Alias> parses, Set<Alias> used) {
    if (expression instanceof GetStructField get && get.child() instanceof JsonToStructs json
        && json.dataType() instanceof StructType pruned) {
      StructField wanted = pruned.fields()[get.ordinal()];
      for (Alias alias : parses) {
        JsonToStructs whole = (JsonToStructs) alias.child();
        StructType schema = (StructType) whole.dataType();
        int ordinal = indexOf(schema, wanted);
        if (sameParse(json, whole) && ordinal >= 0) {
          used.add(alias);
          return new GetStructField(alias.toAttribute(), ordinal, Option.apply(wanted.name()));
        }
      }
    }
    if (expression instanceof JsonToStructs json) {
      for (Alias alias : parses) {
        JsonToStructs whole = (JsonToStructs) alias.child();
        if (sameParse(json, whole) && json.dataType().sameType(whole.dataType())) {
          used.add(alias);
          return alias.toAttribute();
        }
      }
    }
    return expression.mapChildren(child -> substitute(child, parses, used));
  }

  private static boolean sameParse(JsonToStructs a, JsonToStructs b) {
    return a.child().semanticEquals(b.child()) && a.options().equals(b.options())
        && a.timeZoneId().equals(b.timeZoneId()) && a.variantAllowDuplicateKeys() == b.variantAllowDuplicateKeys();
  }

  private static int indexOf(StructType schema, StructField wanted) {
    StructField[] fields = schema.fields();
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].name().equals(wanted.name()) && fields[i].dataType().sameType(wanted.dataType())) {
        return i;
      }
    }
    return -1;
  }
}
