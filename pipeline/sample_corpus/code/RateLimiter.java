package example.platform.client;

import java.time.Clock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A token-bucket rate limiter. Tokens refill continuously at {@code ratePerSecond}
 * up to {@code burst}; each call to {@link #tryAcquire()} takes one token if available.
 *
 * <p>Thread-safe. Uses a monotonic-enough clock supplied by the caller so that tests
 * can control time.
 */
public final class RateLimiter {
    private final double ratePerSecond;
    private final double burst;
    private final Clock clock;
    private final ReentrantLock lock = new ReentrantLock();

    private double tokens;
    private long lastRefillMillis;

    public RateLimiter(double ratePerSecond, double burst, Clock clock) {
        if (ratePerSecond <= 0 || burst < 1) {
            throw new IllegalArgumentException("rate must be > 0 and burst >= 1");
        }
        this.ratePerSecond = ratePerSecond;
        this.burst = burst;
        this.clock = clock;
        this.tokens = burst;
        this.lastRefillMillis = clock.millis();
    }

    /** Returns true and consumes a token if one is available, false otherwise. */
    public boolean tryAcquire() {
        lock.lock();
        try {
            refill();
            if (tokens >= 1.0) {
                tokens -= 1.0;
                return true;
            }
            return false;
        } finally {
            lock.unlock();
        }
    }

    /** Milliseconds until the next token is available; 0 if one is available now. */
    public long millisUntilNextToken() {
        lock.lock();
        try {
            refill();
            if (tokens >= 1.0) {
                return 0L;
            }
            return (long) Math.ceil((1.0 - tokens) / ratePerSecond * 1000.0);
        } finally {
            lock.unlock();
        }
    }

    private void refill() {
        long now = clock.millis();
        long elapsed = Math.max(0L, now - lastRefillMillis);
        tokens = Math.min(burst, tokens + elapsed / 1000.0 * ratePerSecond);
        lastRefillMillis = now;
    }

    public static void main(String[] args) {
        RateLimiter limiter = new RateLimiter(5.0, 2.0, Clock.systemUTC());
        for (int i = 0; i < 4; i++) {
            System.out.printf("request %d allowed=%b%n", i, limiter.tryAcquire());
        }
        System.out.printf("next token in %d ms%n", limiter.millisUntilNextToken());
    }
}
