/*
 * Licensed under the Apache License, Version 2.0 (the "License"); you may not
 * use this file except in compliance with the License. You may obtain a copy
 * of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 * WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 * License for the specific language governing permissions and limitations
 * under the License.
 */
package listgate.clock;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.cassandra.utils.Clock;

/**
 * A test node's clock, set apart from the machine's by an offset that a test
 * can step while the node runs: Cassandra loads it through
 * -Dcassandra.clock=listgate.clock.OffsetClock (Clock.Global), and it reads
 * the offset, whole milliseconds such as "50" or "-50", from the file that
 * -Dlistgate.clock.offset.file names. A missing file is offset 0.
 *
 * Only currentTimeMillis, the wall clock, is offset. In Cassandra 5.0 it
 * gives write timestamps (ClientState.getTimestamp), now() and other time
 * UUIDs, nowInSeconds (TTL expiry, tombstones' deletion times, gc_grace),
 * gossip generations and, sampled every 10 s by MonotonicClock, the epoch
 * times of internode messages: everything another machine or a client can
 * compare. nanoTime is left as the JVM's: Cassandra uses it for timeouts,
 * deadlines, scheduling and latency metrics, which must stay monotonic and
 * mean nothing outside this process, as System.nanoTime is specified.
 *
 * Like a real clock stepped back, a smaller offset makes currentTimeMillis go
 * back; Cassandra's write timestamps and time UUIDs stay monotonic on their
 * own (the last one plus 1 until the clock catches up).
 */
public final class OffsetClock implements Clock
{
    /** The system property naming the offset file. */
    public static final String FILE_PROPERTY = "listgate.clock.offset.file";

    // The file is looked at (one stat) at most this often, by whichever
    // caller finds the check due; the others use the offset already read.
    private static final long CHECK_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

    private final Path file;
    private final AtomicLong nextCheck = new AtomicLong(System.nanoTime() + CHECK_INTERVAL_NANOS);
    private volatile long offsetMillis;
    private volatile String seen; // the file's identity (inode, mtime, size) when last read

    public OffsetClock()
    {
        String name = System.getProperty(FILE_PROPERTY);
        if (name == null || name.isEmpty())
            throw new IllegalStateException("-D" + FILE_PROPERTY + " must name the clock offset file");
        file = Paths.get(name);
        refresh();
    }

    @Override
    public long nanoTime()
    {
        return System.nanoTime();
    }

    @Override
    public long currentTimeMillis()
    {
        long now = System.nanoTime();
        long due = nextCheck.get();
        if (now - due >= 0 && nextCheck.compareAndSet(due, now + CHECK_INTERVAL_NANOS))
            refresh();
        return System.currentTimeMillis() + offsetMillis;
    }

    // refresh reads the offset again when the file changed. A writer should
    // replace it (write another file, rename it over), so that a change is a
    // new inode and a read never sees half a number; a file that does not
    // parse leaves the offset as it was, to be read again at the next check.
    private void refresh()
    {
        try
        {
            BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
            String identity = a.fileKey() + "/" + a.lastModifiedTime() + "/" + a.size();
            if (Objects.equals(identity, seen))
                return;
            String text = new String(Files.readAllBytes(file), StandardCharsets.US_ASCII).trim();
            offsetMillis = Long.parseLong(text);
            seen = identity;
        }
        catch (NoSuchFileException e)
        {
            offsetMillis = 0;
            seen = null;
        }
        catch (IOException | NumberFormatException e)
        {
            // Kept as it was.
        }
    }
}
