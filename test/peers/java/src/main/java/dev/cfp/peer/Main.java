package dev.cfp.peer;

import com.azure.cosmos.ChangeFeedProcessor;
import com.azure.cosmos.ChangeFeedProcessorBuilder;
import com.azure.cosmos.ChangeFeedProcessorContext;
import com.azure.cosmos.ConsistencyLevel;
import com.azure.cosmos.CosmosAsyncClient;
import com.azure.cosmos.CosmosAsyncContainer;
import com.azure.cosmos.CosmosClientBuilder;
import com.azure.cosmos.implementation.changefeed.epkversion.PeerLatestVersionProcessor;
import com.azure.cosmos.models.ChangeFeedProcessorItem;
import com.azure.cosmos.models.ChangeFeedProcessorOptions;
import com.azure.cosmos.models.ChangeFeedProcessorState;
import com.azure.cosmos.models.SqlParameter;
import com.azure.cosmos.models.SqlQuerySpec;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * A Java Change Feed Processor host for cfp's mixed tests (test/peers/java), run as
 * {@code java -cp cfp-java-peer.jar dev.cfp.peer.Main MODE --flag value ...}.
 *
 * <p>Modes:
 * <ul>
 * <li>{@code process}: runs one processor until stdin ends or the JVM is interrupted, then stops
 * it and waits, up to a lease expiration, until its workers have released their leases. Every delivered change is one JSON line on stdout:
 * {@code {"lease":TOKEN,"id":ID,"lsn":N}} (the PK-range family's handler gets no context, so its
 * lines have no lease). Lifecycle events are JSON lines on stderr ({@code "event"}: started,
 * stopping, stopped, error), beside the SDK's own warnings.
 * <li>{@code estimate}: prints the processor's getCurrentState() (and, for the PK-range family,
 * getEstimatedLag()) as one JSON object on stdout.
 * </ul>
 *
 * <p>Flags: --endpoint URL, --database, --container, --lease-container, --prefix (the lease
 * prefix, which cfp calls the processor name), --instance (host name), --family epk|pkrange,
 * --from beginning|now, --acquire/--renew/--expiration/--poll (milliseconds), --max-items N.
 * The account key is read from the COSMOS_KEY environment variable and never printed. TLS trust
 * comes from the JVM's javax.net.ssl.trustStore properties: certificate checks stay on.
 */
public final class Main {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    private Main() {
    }

    public static void main(String[] args) {
        if (args.length == 0) {
            fail("usage: Main process|estimate --flag value ...");
        }
        Map<String, String> flags = parseFlags(args);
        String key = System.getenv("COSMOS_KEY");
        if (key == null || key.isEmpty()) {
            fail("COSMOS_KEY is not set");
        }
        CosmosAsyncClient client = new CosmosClientBuilder()
            .endpoint(require(flags, "endpoint"))
            .key(key)
            .gatewayMode()
            .consistencyLevel(ConsistencyLevel.SESSION)
            .contentResponseOnWriteEnabled(true)
            .userAgentSuffix("cfp-java-peer")
            .buildAsyncClient();
        int code;
        try {
            switch (args[0]) {
                case "process":
                    code = process(client, flags);
                    break;
                case "estimate":
                    code = estimate(client, flags);
                    break;
                default:
                    fail("unknown mode " + args[0] + ": want process or estimate");
                    return;
            }
        } finally {
            client.close();
        }
        OUT.flush();
        System.exit(code);
    }

    private static int process(CosmosAsyncClient client, Map<String, String> flags) {
        String instance = require(flags, "instance");
        ChangeFeedProcessor processor = build(client, flags, instance);
        CountDownLatch stop = new CountDownLatch(1);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.countDown();
            try {
                stopped.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                    // Anything written to stdin is ignored: its end is the stop signal.
                }
            } catch (IOException ignored) {
                // A broken stdin stops the host as its end does.
            }
            stop.countDown();
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        try {
            processor.start().block(Duration.ofMinutes(2));
            event("started", instance, null);
            stop.await();
            event("stopping", instance, null);
            processor.stop().block(Duration.ofMinutes(1));
            // stop() only cancels the workers (epkversion PartitionControllerImpl.shutdown:
            // "TODO: wait for the threads to finish"); each releases its lease on its way out.
            // Wait for that, up to a lease expiration, before the JVM exits under them.
            int owned = awaitReleased(client, flags, instance,
                millis(flags, "expiration", ChangeFeedProcessorOptions.DEFAULT_EXPIRATION_INTERVAL));
            event("stopped", instance, owned == 0 ? null : owned + " leases still owned");
            return 0;
        } catch (RuntimeException | InterruptedException e) {
            event("error", instance, e.toString());
            return 1;
        } finally {
            OUT.flush();
            stopped.countDown();
        }
    }

    /** Polls the lease container until no lease names instance as its owner, or until d. */
    private static int awaitReleased(CosmosAsyncClient client, Map<String, String> flags, String instance, Duration d)
        throws InterruptedException {
        CosmosAsyncContainer leases = client.getDatabase(require(flags, "database")).getContainer(require(flags, "lease-container"));
        SqlQuerySpec q = new SqlQuerySpec("SELECT c.id FROM c WHERE c.Owner = @owner",
            new SqlParameter("@owner", instance));
        long deadline = System.nanoTime() + d.toNanos();
        while (true) {
            List<JsonNode> owned = leases.queryItems(q, JsonNode.class).collectList().block(Duration.ofSeconds(30));
            if (owned.isEmpty() || System.nanoTime() > deadline) {
                return owned.size();
            }
            Thread.sleep(100);
        }
    }

    private static int estimate(CosmosAsyncClient client, Map<String, String> flags) {
        ChangeFeedProcessor processor = build(client, flags, flags.getOrDefault("instance", "java-estimator"));
        ObjectNode out = JSON.createObjectNode();
        ArrayNode states = out.putArray("states");
        List<ChangeFeedProcessorState> current = processor.getCurrentState().block(Duration.ofMinutes(1));
        for (ChangeFeedProcessorState s : current) {
            ObjectNode o = states.addObject();
            o.put("lease", s.getLeaseToken());
            o.put("owner", s.getHostName());
            o.put("lag", s.getEstimatedLag());
            o.put("continuation", s.getContinuationToken());
        }
        if (family(flags).equals("pkrange")) {
            Map<String, Integer> lag = processor.getEstimatedLag().block(Duration.ofMinutes(1));
            ObjectNode l = out.putObject("estimatedLag");
            lag.forEach(l::put);
        }
        OUT.println(out);
        return 0;
    }

    private static ChangeFeedProcessor build(CosmosAsyncClient client, Map<String, String> flags, String instance) {
        CosmosAsyncContainer feed = client.getDatabase(require(flags, "database")).getContainer(require(flags, "container"));
        CosmosAsyncContainer leases = client.getDatabase(require(flags, "database")).getContainer(require(flags, "lease-container"));
        ChangeFeedProcessorOptions options = new ChangeFeedProcessorOptions()
            .setLeasePrefix(require(flags, "prefix"))
            .setLeaseAcquireInterval(millis(flags, "acquire", ChangeFeedProcessorOptions.DEFAULT_ACQUIRE_INTERVAL))
            .setLeaseRenewInterval(millis(flags, "renew", ChangeFeedProcessorOptions.DEFAULT_RENEW_INTERVAL))
            .setLeaseExpirationInterval(millis(flags, "expiration", ChangeFeedProcessorOptions.DEFAULT_EXPIRATION_INTERVAL))
            .setFeedPollDelay(millis(flags, "poll", ChangeFeedProcessorOptions.DEFAULT_FEED_POLL_DELAY));
        if (flags.containsKey("max-items")) {
            options.setMaxItemCount(Integer.parseInt(flags.get("max-items")));
        }
        switch (flags.getOrDefault("from", "beginning")) {
            case "beginning":
                options.setStartFromBeginning(true);
                break;
            case "now":
                break;
            default:
                fail("--from must be beginning or now");
        }
        if (family(flags).equals("pkrange")) {
            return new ChangeFeedProcessorBuilder()
                .hostName(instance)
                .feedContainer(feed)
                .leaseContainer(leases)
                .options(options)
                .handleChanges(docs -> deliver(null, docs))
                .buildChangeFeedProcessor();
        }
        return new PeerLatestVersionProcessor(instance, feed, leases,
            (List<ChangeFeedProcessorItem> items, ChangeFeedProcessorContext ctx) -> {
                List<JsonNode> docs = new java.util.ArrayList<>(items.size());
                for (ChangeFeedProcessorItem item : items) {
                    // The EPK processor reads in wire format 2021-09-15: the document is in
                    // "current", its LSN in the metadata.
                    ObjectNode d = JSON.createObjectNode();
                    d.set("id", item.getCurrent() == null ? null : item.getCurrent().get("id"));
                    d.put("_lsn", item.getChangeFeedMetaData().getLogSequenceNumber());
                    docs.add(d);
                }
                deliver(ctx.getLeaseToken(), docs);
            }, options);
    }

    private static void deliver(String lease, List<JsonNode> docs) {
        StringBuilder lines = new StringBuilder();
        for (JsonNode doc : docs) {
            ObjectNode o = JSON.createObjectNode();
            if (lease != null) {
                o.put("lease", lease);
            }
            o.set("id", doc.get("id"));
            o.set("lsn", doc.get("_lsn"));
            lines.append(o).append('\n');
        }
        synchronized (OUT) {
            OUT.print(lines);
            OUT.flush();
        }
    }

    private static String family(Map<String, String> flags) {
        String f = flags.getOrDefault("family", "epk");
        if (!f.equals("epk") && !f.equals("pkrange")) {
            fail("--family must be epk or pkrange");
        }
        return f;
    }

    private static void event(String name, String instance, String error) {
        ObjectNode o = JSON.createObjectNode();
        o.put("time", Instant.now().toString());
        o.put("event", name);
        o.put("instance", instance);
        if (error != null) {
            o.put("error", error);
        }
        System.err.println(o);
    }

    private static Map<String, String> parseFlags(String[] args) {
        Map<String, String> flags = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                fail("bad argument " + args[i] + ": want --flag value pairs");
            }
            flags.put(args[i].substring(2), args[i + 1]);
        }
        return flags;
    }

    private static String require(Map<String, String> flags, String name) {
        String v = flags.get(name);
        if (v == null || v.isEmpty()) {
            fail("--" + name + " is required");
        }
        return v;
    }

    private static Duration millis(Map<String, String> flags, String name, Duration def) {
        String v = flags.get(name);
        return v == null ? def : Duration.ofMillis(Long.parseLong(v));
    }

    private static void fail(String msg) {
        System.err.println("cfp-java-peer: " + msg);
        System.exit(2);
    }
}
