package io.hashlock.testing;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Prints one closing line, "java: N passed, N failed, N skipped", which
 * `mvn -q` would otherwise not show (Surefire's summary is logged at INFO).
 */
public final class Summary implements TestExecutionListener {
    private final AtomicInteger passed = new AtomicInteger();
    private final AtomicInteger failed = new AtomicInteger();
    private final AtomicInteger skipped = new AtomicInteger();
    private long started;

    @Override
    public void testPlanExecutionStarted(TestPlan plan) {
        started = System.nanoTime();
    }

    @Override
    public void executionSkipped(TestIdentifier id, String reason) {
        if (id.isTest()) skipped.incrementAndGet();
    }

    @Override
    public void executionFinished(TestIdentifier id, TestExecutionResult result) {
        if (!id.isTest()) return;
        if (result.getStatus() == TestExecutionResult.Status.SUCCESSFUL) passed.incrementAndGet();
        else failed.incrementAndGet();
    }

    @Override
    public void testPlanExecutionFinished(TestPlan plan) {
        if (passed.get() + failed.get() + skipped.get() == 0) return;
        System.out.printf("(Redisson %s, %.0f s)%njava: %d passed, %d failed, %d skipped%n",
                System.getProperty("redisson.version", "?"), (System.nanoTime() - started) / 1e9, passed.get(), failed.get(), skipped.get());
    }
}
