package io.deltaflow.storage;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * Hadoop's local file system for {@code FileContext} ({@code fs.AbstractFileSystem.file.impl}, what Spark's
 * checkpoints and Delta's log store use): Hadoop's {@code LocalFs} and {@code RawLocalFs}, over
 * {@link InProcessRawLocalFileSystem}.
 */
public class InProcessLocalFs extends ChecksumFs {

    public InProcessLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(uri, conf));
    }

    /** Hadoop's {@code RawLocalFs}, whose constructors are not public. */
    static class Raw extends DelegateToFileSystem {

        Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new InProcessRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;  // as Hadoop's: the operating system judges local names
        }
    }
}
