import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Runs one node of an embedded-node runner (codelibs' OpenSearchRunner or ElasticsearchClusterRunner)
 * with node settings the runner's command line cannot set: a node of a multi-node cluster needs its own
 * name, HTTP port and discovery type, which the runner would otherwise fix ("Node 1", the first free port,
 * and for OpenSearch "single-node" whenever it runs one node).
 *
 * Usage: EsbridgeNode RUNNER_CLASS key=value ... -- RUNNER_ARGUMENTS
 *
 * The settings are given to the runner's settings builder, so they take precedence over both the
 * runner's defaults and the node's configuration file.  Reflection only: this class compiles against
 * the JDK alone and serves every runner version.
 */
public final class EsbridgeNode {
    private EsbridgeNode() {
    }

    public static void main(final String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: EsbridgeNode RUNNER_CLASS key=value ... -- RUNNER_ARGUMENTS");
            System.exit(2);
        }
        final Map<String, String> settings = new LinkedHashMap<>();
        int i = 1;
        for (; i < args.length && !args[i].equals("--"); i++) {
            final int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("EsbridgeNode: expected key=value, got " + args[i]);
                System.exit(2);
            }
            settings.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        final String[] runnerArgs = Arrays.copyOfRange(args, Math.min(i + 1, args.length), args.length);
        final Class<?> runnerType = Class.forName(args[0]);
        final Class<?> builderType = Class.forName(args[0] + "$Builder");
        final Object runner = runnerType.getConstructor().newInstance();
        final Object builder = Proxy.newProxyInstance(builderType.getClassLoader(), new Class<?>[] {builderType},
                (proxy, method, margs) -> {
                    switch (method.getName()) {
                        case "build":
                            final Object target = margs[1];
                            final Method put = target.getClass().getMethod("put", String.class, String.class);
                            for (final Map.Entry<String, String> e : settings.entrySet()) {
                                put.invoke(target, e.getKey(), e.getValue());
                            }
                            return null;
                        case "hashCode":
                            return System.identityHashCode(proxy);
                        case "equals":
                            return proxy == margs[0];
                        case "toString":
                            return "esbridge node settings " + settings.keySet();
                        default:
                            throw new UnsupportedOperationException(method.getName());
                    }
                });
        runnerType.getMethod("onBuild", builderType).invoke(runner, builder);
        final Method close = runnerType.getMethod("close");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                close.invoke(runner);
            } catch (final Exception e) {
                e.printStackTrace();
            }
        }));
        try {
            runnerType.getMethod("build", String[].class).invoke(runner, (Object) runnerArgs);
        } catch (final InvocationTargetException e) {
            System.err.println("the node did not start:");
            e.getCause().printStackTrace();
            System.exit(1);
        }
        final Method isClosed = runnerType.getMethod("isClosed");
        while (!(Boolean) isClosed.invoke(runner)) {
            Thread.sleep(1000);
        }
    }
}
