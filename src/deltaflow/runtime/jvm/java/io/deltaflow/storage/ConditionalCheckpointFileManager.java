package io.deltaflow.storage;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Arrays;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's streaming checkpoint files (offsets, commits, metadata, state), written on S3 by one PUT.
 *
 * <p>Spark writes each checkpoint file "atomically" by writing a temporary file and renaming it. On S3 a
 * rename is a copy and a delete, and S3A checks both names first: about ten requests for one small file,
 * two files per micro-batch and flow, and one more for each state store file. Yet a PUT is atomic on S3
 * already (readers see the whole object or nothing), so this manager PUTs the file at its name when the
 * stream closes. A file Spark creates only if it is absent (a batch's offsets and commit) is PUT with
 * {@code If-None-Match: *}: S3 itself refuses a second writer of the same batch (412), which Spark gets as
 * the {@link FileAlreadyExistsException} it expects. A refusal of a PUT whose own first attempt landed
 * (its answer lost, the client retried) is a success when the stored bytes are the ones written. A
 * cancelled stream is aborted: nothing is uploaded. Other file systems get Spark's own manager.
 */
public class ConditionalCheckpointFileManager implements CheckpointFileManager {

    private static final String PERFORMANCE = "fs.s3a.create.performance";  // no existence probes
    /** The bytes a stream keeps to compare with a refused PUT's stored object (offsets, commits: < 1 KiB). */
    private static final int KEPT = 1 << 20;

    private final CheckpointFileManager base;
    private final FileSystem s3;  // null when the checkpoint is not on S3

    public ConditionalCheckpointFileManager(Path path, Configuration conf) throws IOException {
        CheckpointFileManager spark;
        try {
            spark = new FileContextBasedCheckpointFileManager(path, conf);
        } catch (Exception e) {  // as Spark's CheckpointFileManager.create (Scala declares no exceptions)
            if (!(e instanceof UnsupportedFileSystemException)) {
                throw sneaky(e);
            }
            spark = new FileSystemBasedCheckpointFileManager(path, conf);
        }
        this.base = spark;
        FileSystem fs = path.getFileSystem(conf);
        this.s3 = fs.getScheme().startsWith("s3") ? fs : null;
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (s3 == null) {
            return base.createAtomic(path, overwriteIfPossible);
        }
        try {
            var builder = s3.createFile(path).overwrite(overwriteIfPossible).opt(PERFORMANCE, "true");
            if (!overwriteIfPossible) {
                builder.must(S3ConditionalLogStore.CONDITIONAL_CREATE, "true");
            }
            return new PutOnClose((FSDataOutputStream) builder.build(), path, s3, !overwriteIfPossible);
        } catch (IOException e) {
            throw sneaky(e);
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        return base.open(path);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        return base.list(path, filter);
    }

    @Override
    public void mkdirs(Path path) {
        base.mkdirs(path);
    }

    @Override
    public boolean exists(Path path) {
        return base.exists(path);
    }

    @Override
    public void delete(Path path) {
        base.delete(path);
    }

    @Override
    public boolean isLocal() {
        return base.isLocal();
    }

    @Override
    public Path createCheckpointDirectory() {
        return base.createCheckpointDirectory();
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
        throw (E) e;  // Spark's Scala interface declares no checked exceptions; its callers catch IOException
    }

    /** The file's S3A stream: its PUT happens at close; cancel aborts it. */
    private static final class PutOnClose extends CancellableFSDataOutputStream {
        private final FSDataOutputStream out;
        private final Path path;
        private final FileSystem fs;
        private final ByteArrayOutputStream written;  // a conditional PUT's bytes, up to KEPT; else null
        private boolean overflow;
        private boolean ended;

        PutOnClose(FSDataOutputStream out, Path path, FileSystem fs, boolean conditional) {
            super(out);
            this.out = out;
            this.path = path;
            this.fs = fs;
            this.written = conditional ? new ByteArrayOutputStream() : null;
        }

        @Override
        public synchronized void write(int b) throws IOException {
            out.write(b);
            if (keeps(1)) {
                written.write(b);
            }
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
            if (keeps(len)) {
                written.write(b, off, len);
            }
        }

        private boolean keeps(int len) {
            overflow = overflow || (written != null && written.size() + len > KEPT);
            return written != null && !overflow;
        }

        @Override
        public synchronized void cancel() {
            if (!ended) {
                ended = true;
                out.abort();
            }
        }

        @Override
        public synchronized void close() throws IOException {
            if (ended) {
                return;
            }
            ended = true;
            try {
                out.close();
            } catch (IOException e) {
                if (written == null || !S3ConditionalLogStore.isPreconditionFailure(e)) {
                    throw e;
                }
                if (overflow || !Arrays.equals(written.toByteArray(), stored())) {
                    FileAlreadyExistsException taken = new FileAlreadyExistsException(path.toString());
                    taken.initCause(e);
                    throw taken;
                }
            }
        }

        private byte[] stored() {
            try (FSDataInputStream in = fs.open(path)) {
                return in.readAllBytes();
            } catch (IOException e) {
                return null;
            }
        }
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + (s3 == null ? "(" + base + ")" : "(s3)");
    }
}
