package io.deltaflow.storage;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system, with the two calls it otherwise makes in a child process done in this one.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem} runs {@code chmod}
 * for every file and folder it creates with a permission, and {@code readlink} for both ends of every
 * rename through {@code FileContext}: each a fork and exec of about 2 ms. Spark's checkpoint files,
 * Delta's commits, the state stores' changelogs and every Parquet file go through them, tens of times per
 * micro-batch (52,000 child processes in one run of the test suite). Here {@code setPermission} sets the
 * same bits with {@link Files#setPosixFilePermissions} (a {@code chmod} system call), and
 * {@code getFileLinkStatus} of a path that is not a symbolic link is its {@code getFileStatus}, as
 * Hadoop's answers it; a symbolic link, or a mode with more than the nine permission bits, still goes to
 * Hadoop's own code.
 */
public class InProcessRawLocalFileSystem extends RawLocalFileSystem {

    private static final PosixFilePermission[] BITS = {  // from 0400 down to 0001
        PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE,
        PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
        PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        short mode = permission.toShort();
        if ((mode & ~0777) != 0) {
            super.setPermission(p, permission);
            return;
        }
        Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
        for (int i = 0; i < BITS.length; i++) {
            if ((mode & (0400 >> i)) != 0) {
                set.add(BITS[i]);
            }
        }
        Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
        if (Files.isSymbolicLink(pathToFile(f).toPath())) {
            return super.getFileLinkStatus(f);
        }
        return getFileStatus(f);
    }
}
