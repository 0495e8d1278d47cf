package dev.sparktrail;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.JarURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.jar.Attributes;
import java.util.jar.JarFile;
import java.util.jar.Manifest;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkFirehoseListener;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.LiveListenerBus;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerApplicationStart;
import org.apache.spark.scheduler.SparkListenerEnvironmentUpdate;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;
import org.apache.spark.status.api.v1.ExecutorSummary;
import org.apache.spark.util.JsonProtocol;
import org.apache.spark.util.JsonProtocolOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes the listener events sparktrail's model uses as a Spark-format rolling event log.
 *
 * <p>The log goes to {@code <traceDir>/raw/eventlog_v2_<appId>/events_<n>_<appId>} (plain JSON
 * lines, Spark's own {@link JsonProtocol}), one segment per flush, each written under a hidden
 * temporary name and renamed into place so a follower never sees half a segment. The trace
 * directory is a path on the driver (no scheme: the local filesystem, as Spark reads {@code
 * spark.eventLog.dir}) or any Hadoop filesystem URI the driver can write ({@code file:}, {@code
 * hdfs:}, {@code s3a:}, ...); the log is written through Hadoop's {@link FileSystem} API with the
 * application's Hadoop configuration ({@code spark.hadoop.*}), as Spark writes its own. An empty
 * {@code appstatus_<appId>.inprogress} marker exists while the listener runs and is renamed to
 * {@code appstatus_<appId>} when it has written everything (the listener bus stopped after the
 * application end, or {@link #close()}).
 *
 * <p>Spark posts the application end first when a SparkContext stops, and then the events of its
 * teardown: the {@code TaskEnd} of tasks that finished meanwhile and the {@code JobEnd} of jobs
 * cancelled by the stop. So the log stays open after the application end until the listener bus
 * has delivered its last event (it no longer lists this listener) and only then is marked
 * complete; without a bus to watch (Spark internals changed), after {@link #QUIET_MILLIS} without
 * events.
 *
 * <p>Spark delivers events to listeners on one thread per queue, and the shared queue drops
 * events once 10,000 are waiting, so {@link #onEvent} does no I/O: it serializes the event
 * (as Spark's own event-log listener does on its queue thread, because TaskInfo objects are
 * mutated later) and appends the line to a buffer; a daemon thread writes the buffer every
 * {@code flushMillis} or every {@code maxEvents} events, whichever comes first.
 *
 * <p>When the JVM shuts down (spark-sql, spark-submit and a Spark Connect server stop their
 * SparkContext in a shutdown hook), a hook that runs after the SparkContext's writes the rest and
 * marks the log complete before Hadoop closes its filesystems.
 *
 * <p>Two ways in: {@code spark.extraListeners=dev.sparktrail.SparktrailListener} with {@code
 * spark.sparktrail.traceDir} (the {@link #SparktrailListener(SparkConf)} constructor), or {@link
 * #SparktrailListener(String)} and {@link #attachTo(SparkContext)} on a running context.
 *
 * <p>Built into a jar by {@code sparktrail listener-jar}, whose manifest records the Spark and
 * Scala versions it was compiled against; on a driver of another Spark version the listener logs
 * one warning naming both (and runs if the listener API is compatible).
 */
public class SparktrailListener extends SparkFirehoseListener {
  public static final String DIR_KEY = "spark.sparktrail.traceDir";
  public static final String FLUSH_MILLIS_KEY = "spark.sparktrail.flushMillis";
  public static final String MAX_EVENTS_KEY = "spark.sparktrail.maxEvents";
  public static final long DEFAULT_FLUSH_MILLIS = 1000L;
  public static final int DEFAULT_MAX_EVENTS = 20000;

  /** Manifest attributes of the listener jar: the versions it was compiled against. */
  public static final String SPARK_VERSION_ATTRIBUTE = "Sparktrail-Spark-Version";

  public static final String SCALA_VERSION_ATTRIBUTE = "Sparktrail-Scala-Version";

  /**
   * System properties that stand in for the manifest's versions (tests of the mismatch warning
   * without a second Spark).
   */
  public static final String BUILT_FOR_SPARK_PROPERTY = "sparktrail.builtFor.spark";

  public static final String BUILT_FOR_SCALA_PROPERTY = "sparktrail.builtFor.scala";

  /**
   * Priority of the shutdown hook that finishes the log: below the SparkContext's (50), so it
   * runs once the context stopped, and above Hadoop's filesystem cache's, which Spark's hooks all
   * precede.
   */
  static final int SHUTDOWN_PRIORITY = 40;

  private static final Logger LOG = LoggerFactory.getLogger(SparktrailListener.class);

  /** Whether the version mismatch was logged (once per JVM and class loader). */
  private static final AtomicBoolean VERSION_CHECKED = new AtomicBoolean();

  /** A URI scheme followed by a colon (a Windows drive letter is one character, not a scheme). */
  private static final Pattern SCHEME = Pattern.compile("^[A-Za-z][A-Za-z0-9+.-]+:");

  /** After the application end, how often the writer checks whether the bus delivered all. */
  static final long END_POLL_MILLIS = 50L;

  /** After the application end with no bus to watch: the log is complete after this quiet time. */
  static final long QUIET_MILLIS = 2000L;

  /**
   * Event classes the model reads (tracer/eventlog.py USED_EVENTS); the rest are skipped. The SQL
   * plans name each stage's operator (tracer/sql_plans.py).
   */
  private static final Set<Class<?>> USED =
      Set.of(
          SparkListenerApplicationStart.class,
          SparkListenerApplicationEnd.class,
          SparkListenerEnvironmentUpdate.class,
          SparkListenerExecutorAdded.class,
          SparkListenerExecutorRemoved.class,
          SparkListenerJobStart.class,
          SparkListenerJobEnd.class,
          SparkListenerStageSubmitted.class,
          SparkListenerStageCompleted.class,
          SparkListenerTaskStart.class,
          SparkListenerTaskEnd.class,
          SparkListenerSQLExecutionStart.class,
          SparkListenerSQLAdaptiveExecutionUpdate.class);

  /**
   * Structured Streaming events the model reads (tracer/streaming.py STREAM_EVENTS), by class
   * name: they live in spark-sql, and QueryIdleEvent only from Spark 3.5 on.
   */
  private static final Set<String> USED_NAMES =
      Set.of(
          "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent",
          "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent",
          "org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent",
          "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent");

  /**
   * Task accumulables kept by {@link #slim}: the stateful operators' SQL metrics the model reads
   * (tracer/app_records.py STATE_METRICS and the marks of a stateful task).
   */
  private static final Set<String> KEPT_ACCUMULABLES =
      Set.of(
          "number of total state rows",
          "number of updated state rows",
          "memory used by state",
          "time to commit changes");

  /**
   * Spark properties copied into the environment event. Only these: the full environment is
   * large, and Spark redacts secrets in its own log, which we would have to re-implement.
   */
  private static final String[] ENV_KEYS = {
    "spark.master",
    "spark.app.name",
    "spark.app.id",
    "spark.submit.deployMode",
    "spark.executor.cores",
    "spark.task.cpus",
    "spark.default.parallelism",
    "spark.sql.shuffle.partitions",
    "spark.dynamicAllocation.enabled",
    "spark.dynamicAllocation.minExecutors",
    "spark.dynamicAllocation.maxExecutors",
    "spark.dynamicAllocation.initialExecutors",
    "spark.executor.instances",
    "spark.executor.memory",
    "spark.driver.memory",
    "spark.driver.cores",
    "spark.memory.fraction",
    "spark.speculation",
    "spark.speculation.multiplier",
    "spark.speculation.quantile",
    "spark.excludeOnFailure.enabled",
    "spark.locality.wait",
    "spark.sql.adaptive.enabled",
    "spark.sql.adaptive.coalescePartitions.enabled",
    "spark.sql.adaptive.skewJoin.enabled",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes",
    "spark.sql.autoBroadcastJoinThreshold",
  };

  private static final ObjectMapper MAPPER = new ObjectMapper();

  /** Live listeners by trace directory, so Python can find one Spark created from the conf. */
  private static final java.util.concurrent.ConcurrentHashMap<String, SparktrailListener> BY_DIR =
      new java.util.concurrent.ConcurrentHashMap<>();

  private final Path root;
  private final String key;
  private final FileSystem fs;
  private volatile Object shutdownHook;
  private final long flushMillis;
  private final int maxEvents;
  private final JsonProtocolOptions options;
  private final Object lock = new Object();
  private final Thread writer;
  private final AtomicLong eventsSeen = new AtomicLong();
  private final AtomicLong eventsReceived = new AtomicLong();
  private final AtomicLong taskEnds = new AtomicLong();
  private final AtomicLong linesWritten = new AtomicLong();
  private final AtomicLong segmentsWritten = new AtomicLong();
  private final AtomicLong ignoredAfterClose = new AtomicLong();
  private final AtomicLong serializeNanos = new AtomicLong();

  // Guarded by lock.
  private List<String> buffer = new ArrayList<>();
  private boolean closing;
  private boolean finished;
  private String appId;
  private SparkConf conf;

  private volatile boolean closed;
  private volatile boolean appEnded;
  private volatile boolean flushNow;
  private volatile long lastEventNanos = System.nanoTime();
  private volatile LiveListenerBus bus;
  private volatile String error;
  private int segment;

  /**
   * Constructor Spark calls for {@code spark.extraListeners}.
   *
   * @param conf the application's configuration; {@code spark.sparktrail.traceDir} is required
   */
  public SparktrailListener(SparkConf conf) {
    this(
        requireDir(conf),
        conf.getLong(FLUSH_MILLIS_KEY, DEFAULT_FLUSH_MILLIS),
        conf.getInt(MAX_EVENTS_KEY, DEFAULT_MAX_EVENTS),
        hadoopConf(conf));
    synchronized (lock) {
      this.conf = conf;
    }
  }

  /** Listener for {@link #attachTo(SparkContext)}, default flush interval and size. */
  public SparktrailListener(String traceDir) {
    this(traceDir, DEFAULT_FLUSH_MILLIS, DEFAULT_MAX_EVENTS);
  }

  /**
   * Listener for {@link #attachTo(SparkContext)}.
   *
   * @param traceDir directory of the trace; the event log goes under {@code raw/}
   * @param flushMillis longest time an event waits in memory before it is written
   * @param maxEvents events that trigger a write before {@code flushMillis} has passed
   */
  public SparktrailListener(String traceDir, long flushMillis, int maxEvents) {
    this(traceDir, flushMillis, maxEvents, activeHadoopConf());
  }

  private SparktrailListener(
      String traceDir, long flushMillis, int maxEvents, Configuration hadoopConf) {
    checkVersion();
    Path dir = traceDirPath(traceDir);
    try {
      FileSystem f = dir.getFileSystem(hadoopConf);
      // The raw local filesystem: no .crc files beside the segments.
      this.fs = f instanceof LocalFileSystem ? ((LocalFileSystem) f).getRaw() : f;
    } catch (IOException | RuntimeException e) {
      // E.g. s3a: without hadoop-aws on the driver's class path, as for Spark's own event log.
      throw new IllegalArgumentException(
          "sparktrail cannot write the trace directory "
              + traceDir
              + " (no Hadoop filesystem for it on the driver's class path?): "
              + e,
          e);
    }
    this.key = dir.toString();
    this.root = new Path(fs.makeQualified(dir), "raw");
    this.flushMillis = Math.max(1L, flushMillis);
    this.maxEvents = Math.max(1, maxEvents);
    // Accumulator updates repeat the task metrics the model already reads; leaving them out
    // roughly halves each TaskEnd line.
    SparkConf jsonConf = new SparkConf(false);
    jsonConf.set("spark.eventLog.includeTaskMetricsAccumulators", "false");
    this.options = new JsonProtocolOptions(jsonConf);
    buffer.add(logStart());
    BY_DIR.put(key, this);
    writer = new Thread(this::writeLoop, "sparktrail-eventlog-writer");
    writer.setDaemon(true);
    writer.start();
    shutdownHook = addShutdownHook();
  }

  /**
   * The trace directory as a Hadoop path: a URI as given, a path without a scheme on the local
   * filesystem, made absolute (as Spark resolves {@code spark.eventLog.dir}).
   */
  static Path traceDirPath(String traceDir) {
    if (SCHEME.matcher(traceDir).find()) {
      return new Path(traceDir);
    }
    // Not through File.toURI(): it ends in "/" once the directory exists, and the key of
    // forTraceDir must not change when the listener has created it.
    return new Path("file", null, new File(traceDir).getAbsolutePath());
  }

  /** The application's Hadoop configuration from its Spark conf (spark.hadoop.* and the rest). */
  private static Configuration hadoopConf(SparkConf conf) {
    try {
      return org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(conf);
    } catch (RuntimeException | LinkageError e) {
      Configuration c = new Configuration();
      for (scala.Tuple2<String, String> kv : conf.getAll()) {
        if (kv._1().startsWith("spark.hadoop.")) {
          c.set(kv._1().substring("spark.hadoop.".length()), kv._2());
        }
      }
      return c;
    }
  }

  /** The active SparkContext's Hadoop configuration, else one from the JVM's spark.* properties. */
  private static Configuration activeHadoopConf() {
    try {
      scala.Option<SparkContext> active = org.apache.spark.SparkContext$.MODULE$.getActive();
      if (active.isDefined()) {
        return active.get().hadoopConfiguration();
      }
    } catch (RuntimeException | LinkageError e) {
      // fall through
    }
    return hadoopConf(new SparkConf());
  }

  /**
   * Finish the log when the JVM exits: a Spark shutdown hook that runs after the SparkContext's
   * (which posts the application end) and before Hadoop closes its filesystems.
   */
  private Object addShutdownHook() {
    try {
      return org.apache.spark.util.ShutdownHookManager.addShutdownHook(
          SHUTDOWN_PRIORITY,
          new scala.runtime.AbstractFunction0<scala.runtime.BoxedUnit>() {
            @Override
            public scala.runtime.BoxedUnit apply() {
              finishAtExit();
              return scala.runtime.BoxedUnit.UNIT;
            }
          });
    } catch (RuntimeException | LinkageError e) {
      Thread hook = new Thread(this::finishAtExit, "sparktrail-shutdown");
      Runtime.getRuntime().addShutdownHook(hook);
      return hook;
    }
  }

  private void finishAtExit() {
    try {
      if (!close(30_000L)) {
        System.err.println("sparktrail: event log under " + root + " not finished at exit");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void removeShutdownHook() {
    Object hook = shutdownHook;
    shutdownHook = null;
    if (hook == null) {
      return;
    }
    try {
      if (hook instanceof Thread) {
        Runtime.getRuntime().removeShutdownHook((Thread) hook);
      } else {
        org.apache.spark.util.ShutdownHookManager.removeShutdownHook(hook);
      }
    } catch (RuntimeException | LinkageError e) {
      // shutting down already: the hook is running or ran
    }
  }

  /** The Spark and Scala versions this class was built for (manifest or system properties). */
  static String[] builtFor() {
    String spark = System.getProperty(BUILT_FOR_SPARK_PROPERTY);
    String scalaVersion = System.getProperty(BUILT_FOR_SCALA_PROPERTY);
    if (spark == null || scalaVersion == null) {
      Attributes attributes = manifestAttributes();
      if (attributes != null) {
        if (spark == null) {
          spark = attributes.getValue(SPARK_VERSION_ATTRIBUTE);
        }
        if (scalaVersion == null) {
          scalaVersion = attributes.getValue(SCALA_VERSION_ATTRIBUTE);
        }
      }
    }
    return new String[] {spark, scalaVersion};
  }

  /** The main attributes of the jar this class was loaded from, or null (not from a jar). */
  private static Attributes manifestAttributes() {
    URL url = SparktrailListener.class.getResource("SparktrailListener.class");
    if (url == null || !"jar".equals(url.getProtocol())) {
      return null;
    }
    try {
      URLConnection connection = url.openConnection();
      if (!(connection instanceof JarURLConnection)) {
        return null;
      }
      connection.setUseCaches(false);
      try (JarFile jar = ((JarURLConnection) connection).getJarFile()) {
        Manifest manifest = jar.getManifest();
        return manifest == null ? null : manifest.getMainAttributes();
      }
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** The Spark version of this JVM ({@code org.apache.spark.SPARK_VERSION}). */
  static String runningSpark() {
    return org.apache.spark.package$.MODULE$.SPARK_VERSION();
  }

  /** The Scala version of this JVM's scala-library. */
  static String runningScala() {
    return scala.util.Properties$.MODULE$.versionNumberString();
  }

  /**
   * The warning for a listener built for another Spark version than the driver's, or null.
   *
   * @param builtSpark Spark version the listener was compiled against (null: unknown, no warning)
   * @param builtScala Scala version it was compiled against (null: unknown)
   */
  static String versionWarning(
      String builtSpark, String builtScala, String spark, String scalaVersion) {
    if (builtSpark == null || builtSpark.equals(spark)) {
      return null;
    }
    return "sparktrail: "
        + SparktrailListener.class.getName()
        + " was built for Spark "
        + builtSpark
        + (builtScala == null ? "" : " (Scala " + builtScala + ")")
        + " but this driver runs Spark "
        + spark
        + " (Scala "
        + scalaVersion
        + "); it runs as long as Spark's listener API is compatible. Build a matching jar with"
        + " `sparktrail listener-jar` where pyspark "
        + spark
        + " is installed.";
  }

  /** Log {@link #versionWarning} once per JVM. */
  private static void checkVersion() {
    if (!VERSION_CHECKED.compareAndSet(false, true)) {
      return;
    }
    try {
      String[] built = builtFor();
      String warning = versionWarning(built[0], built[1], runningSpark(), runningScala());
      if (warning != null) {
        LOG.warn(warning);
      }
    } catch (RuntimeException | LinkageError e) {
      LOG.warn("sparktrail: cannot check the Spark version the listener was built for: " + e);
    }
  }

  /**
   * Print the versions the listener was built for and the ones this JVM has; with trace
   * directories as arguments, also start a listener writing to each (from a {@link SparkConf}, as
   * {@code spark.extraListeners} does) and close it: {@code java -cp
   * sparktrail-listener.jar:$SPARK_HOME/jars/* dev.sparktrail.SparktrailListener [DIR...]}.
   */
  public static void main(String[] args) throws Exception {
    String[] built = builtFor();
    System.out.println(
        "built for Spark "
            + built[0]
            + " (Scala "
            + built[1]
            + "); this JVM has Spark "
            + runningSpark()
            + " (Scala "
            + runningScala()
            + ")");
    for (String dir : args) {
      SparkConf conf = new SparkConf(false).set(DIR_KEY, dir);
      SparktrailListener listener = new SparktrailListener(conf);
      if (!listener.close(10_000L)) {
        throw new IllegalStateException("could not write under " + dir + ": " + listener.error);
      }
    }
  }

  /**
   * The listener writing under {@code traceDir} in this JVM, or null.
   *
   * @param traceDir the directory given to the constructor or {@code spark.sparktrail.traceDir}
   */
  public static SparktrailListener forTraceDir(String traceDir) {
    return BY_DIR.get(traceDirPath(traceDir).toString());
  }

  private static String requireDir(SparkConf conf) {
    if (!conf.contains(DIR_KEY)) {
      throw new IllegalArgumentException(
          "dev.sparktrail.SparktrailListener needs " + DIR_KEY + " (see sparktrail.tracer.spark_conf)");
    }
    return conf.get(DIR_KEY);
  }

  /**
   * Start tracing a running application: write what was posted before we listened (application
   * start, stamped with the attach time; environment, executors) and register with the listener
   * bus.
   *
   * <p>Jobs already running are traced from their next event on.
   */
  public void attachTo(SparkContext sc) {
    List<String> head = new ArrayList<>();
    ObjectNode start = event("SparkListenerApplicationStart");
    start.put("App Name", sc.appName());
    start.put("App ID", sc.applicationId());
    // When tracing began, not sc.startTime(): nothing before the attach is
    // observed, and the driver timeline would charge the whole unobserved
    // stretch to "driver" work (a spurious driver_bound hint on a late attach).
    start.put("Timestamp", Math.max(sc.startTime(), System.currentTimeMillis()));
    start.put("User", sc.sparkUser());
    if (sc.applicationAttemptId().isDefined()) {
      start.put("App Attempt ID", sc.applicationAttemptId().get());
    }
    head.add(start.toString());
    head.add(environment(sc.getConf()));
    synchronized (lock) {
      conf = sc.getConf();
      appId = sc.applicationId();
      buffer.addAll(head);
    }
    bus = sc.listenerBus();
    sc.addSparkListener(this);
    // After registering, so an executor added meanwhile is in the bus events or here
    // (twice is harmless: the model keeps the last core count).
    List<String> executors = new ArrayList<>();
    for (ExecutorSummary e :
        scala.jdk.javaapi.CollectionConverters.asJava(sc.statusStore().executorList(true))) {
      if ("driver".equals(e.id())) {
        continue; // the local executor: its cores come from spark.master
      }
      ObjectNode added = event("SparkListenerExecutorAdded");
      added.put("Timestamp", e.addTime().getTime());
      added.put("Executor ID", e.id());
      ObjectNode info = added.putObject("Executor Info");
      String hostPort = e.hostPort();
      int colon = hostPort.lastIndexOf(':');
      info.put("Host", colon > 0 ? hostPort.substring(0, colon) : hostPort);
      info.put("Total Cores", e.totalCores());
      executors.add(added.toString());
    }
    synchronized (lock) {
      buffer.addAll(executors);
    }
  }

  @Override
  public void onEvent(SparkListenerEvent event) {
    eventsSeen.incrementAndGet();
    if (!USED.contains(event.getClass()) && !USED_NAMES.contains(event.getClass().getName())) {
      return;
    }
    if (closed) {
      ignoredAfterClose.incrementAndGet();
      return;
    }
    long t0 = System.nanoTime();
    String line;
    if (event instanceof SparkListenerEnvironmentUpdate) {
      SparkConf c;
      synchronized (lock) {
        c = conf;
      }
      line = environment(c);
    } else {
      line = JsonProtocol.sparkEventToJsonString(slim(event), options);
    }
    serializeNanos.addAndGet(System.nanoTime() - t0);
    if (event instanceof SparkListenerTaskEnd) {
      taskEnds.incrementAndGet();
    }
    eventsReceived.incrementAndGet();
    synchronized (lock) {
      if (appId == null && event instanceof SparkListenerApplicationStart) {
        scala.Option<String> id = ((SparkListenerApplicationStart) event).appId();
        appId = id.isDefined() ? id.get() : "unknown-app";
      }
      buffer.add(line);
      lastEventNanos = System.nanoTime();
      if (event instanceof SparkListenerApplicationEnd) {
        // Not the end of the log: the teardown's events follow (see the class comment).
        if (bus == null) {
          bus = activeBus();
        }
        appEnded = true;
        flushNow = true;
        lock.notifyAll();
      } else if (buffer.size() >= maxEvents) {
        lock.notifyAll();
      }
    }
  }

  /** The listener bus of the active SparkContext (still active while it stops), or null. */
  private static LiveListenerBus activeBus() {
    try {
      scala.Option<SparkContext> active = org.apache.spark.SparkContext$.MODULE$.getActive();
      return active.isDefined() ? active.get().listenerBus() : null;
    } catch (RuntimeException | LinkageError e) {
      return null;
    }
  }

  /**
   * Whether the bus will deliver nothing more after the application end: it stopped (its queues
   * are cleared once drained) or this listener was removed from it.
   */
  private boolean deliveryOver() {
    LiveListenerBus b = bus;
    if (b != null) {
      try {
        return !b.listeners().contains(this);
      } catch (RuntimeException | LinkageError e) {
        bus = null;
      }
    }
    return (System.nanoTime() - lastEventNanos) / 1_000_000L >= QUIET_MILLIS;
  }

  /**
   * The event without its tasks' accumulator values, but for the few state-store metrics the
   * model reads ({@link #KEPT_ACCUMULABLES}): the model reads the task metrics, and per-task SQL
   * metrics made up most of each TaskEnd line and of its serialization time.
   */
  private static SparkListenerEvent slim(SparkListenerEvent event) {
    if (event instanceof SparkListenerTaskEnd) {
      SparkListenerTaskEnd e = (SparkListenerTaskEnd) event;
      if (e.taskInfo() != null && !e.taskInfo().accumulables().isEmpty()) {
        return new SparkListenerTaskEnd(
            e.stageId(),
            e.stageAttemptId(),
            e.taskType(),
            e.reason(),
            keptAccumulables(e.taskInfo()),
            e.taskExecutorMetrics(),
            e.taskMetrics());
      }
    } else if (event instanceof SparkListenerTaskStart) {
      SparkListenerTaskStart e = (SparkListenerTaskStart) event;
      if (e.taskInfo() != null && !e.taskInfo().accumulables().isEmpty()) {
        return new SparkListenerTaskStart(
            e.stageId(), e.stageAttemptId(), e.taskInfo().cloneWithEmptyAccumulables());
      }
    }
    return event;
  }

  /** A copy of {@code info} holding only the accumulables in {@link #KEPT_ACCUMULABLES}. */
  @SuppressWarnings("unchecked")
  private static TaskInfo keptAccumulables(TaskInfo info) {
    scala.collection.immutable.Seq<AccumulableInfo> kept =
        (scala.collection.immutable.Seq<AccumulableInfo>)
            info.accumulables()
                .filter(a -> a.name().isDefined() && KEPT_ACCUMULABLES.contains(a.name().get()));
    TaskInfo copy = info.cloneWithEmptyAccumulables();
    if (!kept.isEmpty()) {
      copy.setAccumulables(kept);
    }
    return copy;
  }

  /**
   * Write everything received and mark the log complete; later events are ignored.
   *
   * @param timeoutMillis longest wait for the writer thread
   * @return whether the writer finished within the timeout
   */
  public boolean close(long timeoutMillis) throws InterruptedException {
    closed = true;
    synchronized (lock) {
      closing = true;
      lock.notifyAll();
    }
    writer.join(timeoutMillis);
    synchronized (lock) {
      return finished;
    }
  }

  /** {@link #close(long)} with a 60 s timeout. */
  public boolean close() throws InterruptedException {
    return close(60_000L);
  }

  private void writeLoop() {
    long last = System.nanoTime();
    while (true) {
      List<String> batch;
      boolean lastBatch;
      String id;
      // Checked without holding the lock: the bus thread takes it in onEvent.
      boolean over = appEnded && deliveryOver();
      synchronized (lock) {
        if (over) {
          closed = true; // nothing can arrive any more; count anything that does as ignored
          closing = true;
        }
        long waitMs = flushMillis - (System.nanoTime() - last) / 1_000_000L;
        if (!closing && !flushNow && buffer.size() < maxEvents && waitMs > 0) {
          try {
            lock.wait(appEnded ? Math.min(waitMs, END_POLL_MILLIS) : waitMs);
          } catch (InterruptedException e) {
            closing = true;
          }
          continue;
        }
        flushNow = false;
        lastBatch = closing;
        id = appId;
        if (id == null && !lastBatch) {
          last = System.nanoTime(); // no application id yet: keep buffering
          continue;
        }
        batch = buffer;
        buffer = new ArrayList<>();
      }
      last = System.nanoTime();
      if (id == null) {
        id = "unknown-app";
      }
      try {
        Path dir = new Path(root, "eventlog_v2_" + id);
        Path marker = new Path(dir, "appstatus_" + id + ".inprogress");
        if (segment == 0) {
          fs.mkdirs(dir);
          if (!fs.exists(marker)) {
            fs.create(marker, false).close();
          }
        }
        writeSegment(id, batch);
        if (lastBatch) {
          rename(marker, new Path(dir, "appstatus_" + id));
        }
      } catch (IOException | RuntimeException e) {
        error = e.toString();
        System.err.println("sparktrail: cannot write event log under " + root + ": " + e);
        synchronized (lock) {
          batch.addAll(buffer); // keep the order; retry at the next flush
          buffer = batch;
        }
        if (!lastBatch) {
          continue;
        }
      }
      if (lastBatch) {
        BY_DIR.remove(key, this);
        removeShutdownHook();
        synchronized (lock) {
          finished = error == null || buffer.isEmpty();
          lock.notifyAll();
        }
        return;
      }
    }
  }

  private void writeSegment(String id, List<String> lines) throws IOException {
    if (lines.isEmpty()) {
      return;
    }
    Path dir = new Path(root, "eventlog_v2_" + id);
    int n = segment + 1;
    String name = "events_" + n + "_" + id;
    Path tmp = new Path(dir, "." + name + ".tmp");
    try (Writer out =
        new BufferedWriter(
            new OutputStreamWriter(fs.create(tmp, true), StandardCharsets.UTF_8), 1 << 20)) {
      for (String line : lines) {
        out.write(line);
        out.write('\n');
      }
    }
    rename(tmp, new Path(dir, name));
    segment = n;
    segmentsWritten.incrementAndGet();
    linesWritten.addAndGet(lines.size());
  }

  /** Rename {@code from} to {@code to} (atomic on local and HDFS; a copy on object stores). */
  private void rename(Path from, Path to) throws IOException {
    if (!fs.rename(from, to)) {
      throw new IOException("cannot rename " + from + " to " + to);
    }
  }

  private static ObjectNode event(String name) {
    ObjectNode node = MAPPER.createObjectNode();
    node.put("Event", name);
    return node;
  }

  private static String logStart() {
    ObjectNode node = event("SparkListenerLogStart");
    node.put("Spark Version", org.apache.spark.package$.MODULE$.SPARK_VERSION());
    return node.toString();
  }

  private static String environment(SparkConf conf) {
    ObjectNode node = event("SparkListenerEnvironmentUpdate");
    ObjectNode props = node.putObject("Spark Properties");
    if (conf != null) {
      for (String key : ENV_KEYS) {
        if (conf.contains(key)) {
          props.put(key, conf.get(key));
        }
      }
    }
    return node.toString();
  }

  /** Listener events delivered to {@link #onEvent}, of any kind. */
  public long eventsSeen() {
    return eventsSeen.get();
  }

  /** Events of the kinds the model uses, taken into the log. */
  public long eventsReceived() {
    return eventsReceived.get();
  }

  /** TaskEnd events taken into the log. */
  public long taskEndsReceived() {
    return taskEnds.get();
  }

  /** Lines written to segment files (received events plus the synthetic header lines). */
  public long linesWritten() {
    return linesWritten.get();
  }

  /** Lines waiting in memory for the writer thread. */
  public long linesBuffered() {
    synchronized (lock) {
      return buffer.size();
    }
  }

  /** Segment files written so far. */
  public long segmentsWritten() {
    return segmentsWritten.get();
  }

  /** Used events delivered after {@link #close(long)} (not written). */
  public long ignoredAfterClose() {
    return ignoredAfterClose.get();
  }

  /** Total time spent serializing events on the listener-bus thread, in ns. */
  public long serializeNanos() {
    return serializeNanos.get();
  }

  /** The application id the log is written for, or null before it is known. */
  public String appId() {
    synchronized (lock) {
      return appId;
    }
  }

  /** The directory holding {@code eventlog_v2_<appId>/}. */
  public String rawDir() {
    return root.toString();
  }

  /** Whether everything was written and the log marked complete. */
  public boolean isFinished() {
    synchronized (lock) {
      return finished;
    }
  }

  /** The last write error, or null. */
  public String lastError() {
    return error;
  }
}
