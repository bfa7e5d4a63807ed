package io.deltaflow.storage;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.stream.Collectors;

import io.delta.storage.S3SingleDriverLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's S3 log store, made safe for several writing drivers with S3's conditional writes.
 *
 * <p>Delta commits version N by creating {@code _delta_log/N.json} only if it does not exist. Delta's
 * {@link S3SingleDriverLogStore} guards that with a lock inside one JVM, then a plain
 * {@code create(path, overwrite=false)}, which on S3A checks for the file and then PUTs it: two drivers
 * that both pass the check both PUT, and the second silently replaces the first's commit. This store
 * creates commit files with S3A's conditional create ({@code fs.option.create.conditional.overwrite}:
 * a PUT with {@code If-None-Match: *}, Hadoop 3.4.2+), so S3 itself refuses the second PUT (412). S3A
 * reports the refusal at {@code close()}; this store turns it into the
 * {@link FileAlreadyExistsException} Delta expects, so the losing transaction checks for conflicts and
 * commits at the next version. A file that already holds exactly this commit (a PUT whose answer was
 * lost and that S3A retried) is a success.
 */
public class S3ConditionalLogStore extends S3SingleDriverLogStore {

    static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

    public S3ConditionalLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        if (overwrite) {
            super.write(path, actions, true, hadoopConf);  // _last_checkpoint and the like
            return;
        }
        List<String> lines = new ArrayList<>();
        actions.forEachRemaining(lines::add);
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (fs.exists(path)) {
            throw new FileAlreadyExistsException(path.toString());
        }
        try {
            FSDataOutputStream out = (FSDataOutputStream) fs.createFile(path).overwrite(false)
                    .must(CONDITIONAL_CREATE, "true").build();
            try {
                for (String line : lines) {
                    out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                }
            } finally {
                out.close();  // the PUT, and its 412 when another driver committed this version first
            }
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            throw alreadyExists(path, e);
        } catch (IOException e) {
            if (!isPreconditionFailure(e)) {
                throw e;
            }
            if (lines.equals(readLines(path, fs))) {
                return;
            }
            throw alreadyExists(path, e);
        }
    }

    private static FileAlreadyExistsException alreadyExists(Path path, Throwable cause) {
        FileAlreadyExistsException lost = new FileAlreadyExistsException(path.toString());
        lost.initCause(cause);
        return lost;
    }

    static boolean isPreconditionFailure(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getName();
            String message = String.valueOf(t.getMessage());
            if (name.endsWith("RemoteFileChangedException") || message.contains("412")
                    || message.contains("PreconditionFailed")) {
                return true;
            }
        }
        return false;
    }

    private static List<String> readLines(Path path, FileSystem fs) {
        try (FSDataInputStream in = fs.open(path);
             BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            return reader.lines().collect(Collectors.toList());
        } catch (IOException e) {
            return null;
        }
    }
}
