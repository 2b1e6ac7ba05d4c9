package org.esbridge.analysis;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.pattern.PatternCaptureGroupTokenFilter;
import org.elasticsearch.plugin.Inject;
import org.elasticsearch.plugin.NamedComponent;
import org.elasticsearch.plugin.analysis.TokenFilterFactory;
import org.elasticsearch.plugin.settings.AnalysisSettings;
import org.elasticsearch.plugin.settings.BooleanSetting;
import org.elasticsearch.plugin.settings.ListSetting;

import java.util.List;
import java.util.regex.Pattern;

/** analysis-common {@code pattern_capture} (used by the .security index's email analyzer). */
@NamedComponent("pattern_capture")
public class PatternCaptureTokenFilterFactory implements TokenFilterFactory {
    @AnalysisSettings
    public interface Settings {
        @ListSetting(path = "patterns") List<String> patterns();
        @BooleanSetting(path = "preserve_original", defaultValue = true) boolean preserveOriginal();
    }

    private final Pattern[] patterns;
    private final boolean preserveOriginal;

    @Inject
    public PatternCaptureTokenFilterFactory(Settings settings) {
        // Elasticsearch builds a default instance (empty settings) of every stable component for each index,
        // so a missing required setting may only fail when the filter is actually used.
        List<String> p = settings.patterns();
        this.patterns = p == null ? new Pattern[0] : p.stream().map(Pattern::compile).toArray(Pattern[]::new);
        this.preserveOriginal = settings.preserveOriginal();
    }

    @Override
    public TokenStream create(TokenStream in) {
        if (patterns.length == 0) throw new IllegalArgumentException("required setting 'patterns' is missing");
        return new PatternCaptureGroupTokenFilter(in, preserveOriginal, patterns);
    }
}
