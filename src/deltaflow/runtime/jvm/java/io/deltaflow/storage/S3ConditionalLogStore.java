package io.deltaflow.storage;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.ArrayList;
import java.util.List;
import java.util.Iterator;
import java.util.stream.Collectors;

import io.delta.storage.S3SingleDriverLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Delta's S3 log store, safe for several writing drivers on S3 with conditional writes.
 *
 * <p>Hadoop 3.5's S3A creates a file without overwrite as a PUT with {@code If-None-Match: *}
 * ({@code fs.s3a.create.conditional.enabled}, on by default), so two drivers committing the same
 * version never overwrite each other: the second PUT fails with 412. S3A reports that failure at
 * {@code close()} as a {@code RemoteFileChangedException}, which Delta's
 * {@link S3SingleDriverLogStore} does not recognise, so the losing transaction fails instead of
 * checking for conflicts and retrying at the next version. This store turns it into the
 * {@link FileAlreadyExistsException} Delta expects, unless the file holds exactly this commit (a PUT
 * whose answer was lost and was retried by S3A), which is then a success.
 */
public class S3ConditionalLogStore extends S3SingleDriverLogStore {

    public S3ConditionalLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        List<String> lines = new ArrayList<>();
        actions.forEachRemaining(lines::add);
        try {
            super.write(path, lines.iterator(), overwrite, hadoopConf);
        } catch (FileAlreadyExistsException e) {
            throw e;
        } catch (IOException e) {
            if (overwrite || !isPreconditionFailure(e)) {
                throw e;
            }
            if (lines.equals(readLines(path, hadoopConf))) {
                return;
            }
            FileAlreadyExistsException lost = new FileAlreadyExistsException(path.toString());
            lost.initCause(e);
            throw lost;
        }
    }

    private static boolean isPreconditionFailure(Throwable e) {
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

    private static List<String> readLines(Path path, Configuration hadoopConf) {
        try {
            FileSystem fs = path.getFileSystem(hadoopConf);
            try (FSDataInputStream in = fs.open(path);
                 BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                return reader.lines().collect(Collectors.toList());
            }
        } catch (IOException e) {
            return null;
        }
    }
}
