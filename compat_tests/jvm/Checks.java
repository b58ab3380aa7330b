import java.util.Arrays;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

/**
 * Helpers shared by the scenario programs. A scenario prints "ok NAME" after each group of
 * checks that passed; the first failed check throws, which ends the program with exit code 1
 * and the stack trace on stderr (the pytest side shows both).
 */
final class Checks {
    private Checks() {}

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    static void equal(Object expected, Object actual, String what) {
        boolean same = expected instanceof byte[] e && actual instanceof byte[] a
            ? Arrays.equals(e, a)
            : Objects.equals(expected, actual);
        if (!same) {
            throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
        }
    }

    static void passed(String name) {
        System.out.println("ok " + name);
        System.out.flush();
    }

    /** The cause of a failed future's ExecutionException, which must be of class `expected`. */
    static void failsWith(Class<? extends Throwable> expected, FutureCall call, String what)
            throws InterruptedException {
        try {
            call.run();
        } catch (ExecutionException e) {
            check(expected.isInstance(e.getCause()), what + ": failed with " + e.getCause()
                + " instead of " + expected.getSimpleName());
            return;
        }
        throw new AssertionError(what + ": succeeded, expected " + expected.getSimpleName());
    }

    /** Client properties: bootstrap.servers, then key/value pairs. */
    static Properties props(String bootstrap, Object... keyValues) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        for (int i = 0; i < keyValues.length; i += 2) {
            props.put(keyValues[i].toString(), keyValues[i + 1].toString());
        }
        return props;
    }

    /** Wait up to `timeoutMs` for `condition`, polling every 100 ms. */
    static void waitUntil(Condition condition, long timeoutMs, String what) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!condition.holds()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(100);
        }
    }

    @FunctionalInterface
    interface FutureCall {
        void run() throws InterruptedException, ExecutionException;
    }

    @FunctionalInterface
    interface Condition {
        boolean holds() throws Exception;
    }
}
