import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.utils.Exit;

/**
 * Runs several invocations of Kafka's command-line tools in one JVM, one after the other: a
 * JVM start costs more than most tool runs. Arguments: groups "MAIN_CLASS ARG...", separated
 * by SEPARATOR. After each invocation a line "MARKER EXIT_CODE MILLISECONDS" goes to stdout and
 * to stderr, so that the caller can split both streams per invocation. A tool's Exit.exit (its error
 * path) ends that invocation only.
 */
public final class KafkaToolBatch {
    static final String SEPARATOR = "--kbroker-next-tool";
    static final String MARKER = "### kbroker-tool-exit";

    /** Thrown by the exit procedure instead of ending the JVM. */
    static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> {
            throw new ToolExit(code);
        });
        List<List<String>> commands = new ArrayList<>();
        List<String> current = new ArrayList<>();
        for (String arg : args) {
            if (arg.equals(SEPARATOR)) {
                commands.add(current);
                current = new ArrayList<>();
            } else {
                current.add(arg);
            }
        }
        commands.add(current);
        for (List<String> command : commands) {
            long started = System.nanoTime();
            int code = run(command.get(0), command.subList(1, command.size()).toArray(new String[0]));
            String marker = MARKER + " " + code + " " + (System.nanoTime() - started) / 1_000_000;
            System.out.flush();
            System.err.flush();
            System.out.println(marker);
            System.err.println(marker);
            System.out.flush();
            System.err.flush();
        }
        System.exit(0);
    }

    private static int run(String mainClass, String[] args) throws Exception {
        Method main = Class.forName(mainClass).getMethod("main", String[].class);
        try {
            main.invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof ToolExit) {
                return ((ToolExit) cause).code;
            }
            cause.printStackTrace();
            return 1;
        }
    }
}
