package org.esbridge.analysis;

import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.core.KeywordTokenizer;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenizerFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.IntSetting;

/** analysis-common {@code keyword} tokenizer. */
@NamedComponent("keyword")
public class KeywordTokenizerFactory implements TokenizerFactory {
    @AnalysisSettings
    public interface Settings {
        @IntSetting(path = "buffer_size", defaultValue = 256) int bufferSize();
    }

    private final int bufferSize;

    @Inject
    public KeywordTokenizerFactory(Settings settings) {
        this.bufferSize = settings.bufferSize();
    }

    @Override
    public Tokenizer create() {
        return new KeywordTokenizer(bufferSize);
    }
}
