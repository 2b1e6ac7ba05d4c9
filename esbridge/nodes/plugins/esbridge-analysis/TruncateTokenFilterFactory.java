package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.miscellaneous.TruncateTokenFilter;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.IntSetting;

/** analysis-common {@code truncate} (length, default 10). */
@NamedComponent("truncate")
public class TruncateTokenFilterFactory implements TokenFilterFactory {
    @AnalysisSettings
    public interface Settings {
        @IntSetting(path = "length", defaultValue = 10)
        int length();
    }

    private final int length;

    @Inject
    public TruncateTokenFilterFactory(Settings settings) {
        this.length = settings.length();
        if (length <= 0) throw new IllegalArgumentException("length parameter must be provided");
    }

    @Override
    public TokenStream create(TokenStream in) {
        return new TruncateTokenFilter(in, length);
    }
}
